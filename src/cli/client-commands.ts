/** The client commands (the server is `agentd [serve]`, parsed by config.ts): cli.ts loads their modules only for these. */
export const CLIENT_COMMANDS = ['run', 'chat', 'conversations', 'events', 'acp', 'schedules'] as const;
