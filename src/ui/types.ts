/** The shapes of the HTTP contract the page reads (/work/shared/design/api.md), loosely typed. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  cost: number | null;
}

export interface Conversation {
  id: string;
  title: string | null;
  status: string;
  workdir: string;
  llm: ({ model: string; base_url?: string | null } & Record<string, unknown>) | null;
  confirmation_mode: boolean;
  pending_actions: AgentEvent[];
  current_run_id: string | null;
  event_count: number;
  usage: Usage;
  created_at: string;
  updated_at: string;
}

/** Any event: the common fields and whatever its kind carries. */
export interface AgentEvent {
  id: string;
  seq: number;
  conversation_id: string;
  timestamp: string;
  source: string;
  kind: string;
  parent_tool_call_id?: string | null;
  agent?: string | null;
  [field: string]: unknown;
}

export interface Page<T> {
  items: T[];
  next_page_id: string | null;
}

export interface FileEntry {
  name: string;
  path: string;
  type: string;
  size: number;
  modified_at: string;
}

export const STATUSES = ['idle', 'running', 'paused', 'waiting_for_confirmation', 'waiting_for_input', 'finished', 'error', 'stuck'] as const;
