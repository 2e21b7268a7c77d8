/**
 * What class of failure an LlmError is, in `llm.fallback_on`'s words: the one place that decides
 * whether a request may move to another model. Authentication, billing (quota) and invalid
 * requests have no class: another model would not cure them, or would cost money the user did
 * not agree to spend.
 */
import type { FallbackReason } from '../../core/schemas/llm-config.js';
import type { LlmError } from '../../core/agent/llm.js';

const OVERLOADED = /overloaded/i;

export function failureReasonOf(error: Pick<LlmError, 'code' | 'status' | 'message'>): FallbackReason | null {
  switch (error.code) {
    case 'llm_server_error':
      if (error.status === 529 || OVERLOADED.test(error.message)) return 'overloaded';
      if (error.status === 503) return 'unavailable';
      return 'server_error';
    case 'llm_connection_error':
      return 'unavailable';
    case 'llm_timeout':
      return 'timeout';
    case 'llm_rate_limited':
      return 'rate_limited';
    case 'llm_context_exceeded':
      return 'context_window';
    case 'llm_content_filtered':
      return 'content_filtered';
    default:
      return null;
  }
}

/** The reason a retry is shown with: the failure class, or the error code without its `llm_` prefix. */
export function retryReasonOf(error: Pick<LlmError, 'code' | 'status' | 'message'>): string {
  return failureReasonOf(error) ?? error.code.replace(/^llm_/, '');
}
