// MCP servers reached with the official SDK: stdio ones in the conversation's sandbox, HTTP ones under the address policy, checked as each connection is made.
export { SdkMcpConnector } from './mcp-sdk-connector.js';
