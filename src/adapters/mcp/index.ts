// MCP servers reached with the official SDK: stdio ones in the conversation's sandbox, HTTP ones under the address policy.
export { SdkMcpConnector } from './mcp-sdk-connector.js';
