import * as acp from '@agentclientprotocol/sdk';
import { AgentdError, type AgentdClient, type Conversation } from '../../client/index.js';
import { VERSION } from '../../version.js';
import { noLlmMessage } from '../connection.js';
import { AcpSession } from './acp-session.js';
import { mcpServers, UnsupportedContent } from './session-inputs.js';
import { configChange, configOptions, isModeId, modeState, permissionsFor } from './session-modes.js';

export interface AcpAgentOptions {
  client: AgentdClient;
  /** Whether the server runs in this process (its workdirs are this machine's paths). */
  embedded: boolean;
  /** The server's address (for messages). */
  url: string;
  log: (line: string) => void;
}

/**
 * The ACP agent: every method of the stable v1 schema that agentd can back, each one or two
 * calls of the agentd client. Sessions are conversations; what a session holds lives in agentd,
 * so an editor that restarts (or another editor) loads it again.
 */
export function createAcpAgent(options: AcpAgentOptions): acp.AgentApp {
  const { client, log } = options;
  const sessions = new Map<string, AcpSession>();
  let elicitation = false;
  let editor: acp.AgentContext | null = null;

  const open = (conversation: Conversation, context: acp.AgentContext): AcpSession => {
    sessions.get(conversation.id)?.close();
    const session = new AcpSession({ client, editor: context, elicitation, log }, conversation);
    sessions.set(conversation.id, session);
    return session;
  };
  const sessionOf = (sessionId: string): AcpSession => {
    const session = sessions.get(sessionId);
    if (!session) throw acp.RequestError.sessionNotFound(sessionId);
    return session;
  };
  const conversationOf = (sessionId: string) => client.conversations.get(sessionId).catch((error: unknown) => {
    throw error instanceof AgentdError && error.status === 404 ? acp.RequestError.sessionNotFound(sessionId) : error;
  });
  /** After the answer: the skills and commands, and the permissions a closed editor left unanswered. */
  const afterOpening = (session: AcpSession) =>
    setImmediate(() => {
      void announceCommands(client, editor!, session.id).catch((error: unknown) => log(`session ${session.id}: no commands: ${String(error)}`));
      void session.askPending();
    });
  const described = (conversation: Conversation) => ({ modes: modeState(conversation), configOptions: configOptions(conversation) });

  return acp
    .agent({ name: 'agentd' })
    .onConnect((connection) => {
      editor = connection.client;
    })
    .onRequest('initialize', ({ params }) => {
      elicitation = Boolean(params.clientCapabilities?.elicitation?.form);
      return {
        protocolVersion: acp.PROTOCOL_VERSION,
        agentInfo: { name: 'agentd', title: 'agentd', version: VERSION },
        agentCapabilities: {
          loadSession: true,
          promptCapabilities: { image: true, embeddedContext: true, audio: false },
          mcpCapabilities: { http: true, sse: true },
          sessionCapabilities: { list: {}, resume: {} },
        },
        authMethods: [],
      };
    })
    .onRequest('session/new', async ({ params, client: context }) => {
      const body = { mcp_servers: mcpServers(params.mcpServers), permissions: permissionsFor('default', undefined) };
      const conversation = await client.conversations.create({ ...body, workdir: params.cwd }).catch(async (error: unknown) => {
        // A remote server cannot work in the editor's directory when it is not on its machine: it picks a workdir.
        if (options.embedded || !(error instanceof AgentdError) || error.status >= 500) throw error;
        log(`the server did not take ${params.cwd} as the workdir (${error.message}); it chose one`);
        return client.conversations.create(body);
      });
      const session = open(conversation, context);
      await session.follow({ fromEnd: true });
      afterOpening(session);
      return { sessionId: conversation.id, ...described(conversation) };
    })
    .onRequest('session/load', async ({ params, client: context }) => {
      const conversation = await conversationOf(params.sessionId);
      const session = open(conversation, context);
      await session.replay();
      await session.follow({ fromEnd: false });
      afterOpening(session);
      return described(conversation);
    })
    .onRequest('session/resume', async ({ params, client: context }) => {
      const conversation = await conversationOf(params.sessionId);
      const session = open(conversation, context);
      await session.follow({ fromEnd: true });
      afterOpening(session);
      return described(conversation);
    })
    .onRequest('session/list', async ({ params }) => {
      const page = await client.conversations.list({ sort: 'updated_at', order: 'desc', limit: 100, ...(params.cursor ? { page_id: params.cursor } : {}) });
      const sessions = page.items
        .filter((conversation) => !params.cwd || conversation.workdir === params.cwd)
        .map((conversation) => ({ sessionId: conversation.id, cwd: conversation.workdir, title: conversation.title, updatedAt: conversation.updated_at }));
      return { sessions, nextCursor: page.next_page_id };
    })
    .onRequest('session/prompt', async ({ params }) => {
      const session = sessionOf(params.sessionId);
      try {
        return { stopReason: await session.runPrompt(params.prompt) };
      } catch (error) {
        if (error instanceof UnsupportedContent) throw acp.RequestError.invalidParams(undefined, error.message);
        if (error instanceof AgentdError && error.code === 'llm_not_configured') throw acp.RequestError.internalError({ code: error.code }, noLlmMessage(options.embedded ? null : options.url));
        if (error instanceof AgentdError) throw acp.RequestError.internalError({ code: error.code, status: error.status }, error.message);
        throw error;
      }
    })
    .onNotification('session/cancel', async ({ params }) => {
      await sessions.get(params.sessionId)?.cancel();
    })
    .onRequest('session/set_mode', async ({ params }) => {
      if (!isModeId(params.modeId)) throw acp.RequestError.invalidParams(undefined, `unknown mode ${params.modeId}`);
      const conversation = await conversationOf(params.sessionId);
      // Confirmation mode makes every call ask: the modes say what asks, through the rules alone.
      if (conversation.confirmation_mode) await client.runs.setConfirmation(conversation.id, false);
      await client.conversations.updateConfig(conversation.id, { permissions: permissionsFor(params.modeId, conversation.permissions) });
      return {};
    })
    .onRequest('session/set_config_option', async ({ params }) => {
      const change = configChange(params.configId, params.value);
      if (typeof change === 'string') throw acp.RequestError.invalidParams(undefined, change);
      const conversation = await client.conversations.updateConfig((await conversationOf(params.sessionId)).id, change);
      return { configOptions: configOptions(conversation) };
    });
}

/** The conversation's skills and slash commands as the editor's `/` commands. */
async function announceCommands(client: AgentdClient, editor: acp.AgentContext, sessionId: string): Promise<void> {
  const catalog = await client.skills.list(sessionId);
  const availableCommands: acp.AvailableCommand[] = [
    ...catalog.commands.map((command) => ({ name: command.name, description: command.description ?? '', ...(command.argument_hint ? { input: { hint: command.argument_hint } } : {}) })),
    ...catalog.skills.map((skill) => ({ name: skill.name, description: skill.description ?? '' })),
  ];
  await editor.notify('session/update', { sessionId, update: { sessionUpdate: 'available_commands_update', availableCommands } });
}
