import { createContext, type ComponentChildren } from 'preact';
import { useContext } from 'preact/hooks';
import { editDiff, type DiffLine } from './file-diff.js';
import { renderMarkdown } from './markdown.js';
import type { AgentEvent } from './types.js';

export function Markdown({ text }: { text: string }) {
  return <div class="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(text) }} />;
}

export function Diff({ lines }: { lines: DiffLine[] }) {
  return (
    <pre class="diff">
      {lines.map((line, index) => (
        <div key={index} class={`diff-${line.sign === '+' ? 'add' : line.sign === '-' ? 'del' : line.sign === '@' ? 'hunk' : 'ctx'}`}>
          {line.sign === '@' ? line.text : `${line.sign} ${line.text}`}
        </div>
      ))}
    </pre>
  );
}

const str = (value: unknown): string => (typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value));
const time = (event: AgentEvent) => new Date(event.timestamp).toLocaleTimeString();

/** The `usage` event of the LLM call that wrote the card's step, shown in the card (see timeline.tsx). */
const StepUsage = createContext<AgentEvent | undefined>(undefined);

function UsageOfStep({ usage }: { usage: AgentEvent }) {
  return (
    <span class="step-usage" data-usage-seq={usage.seq} title={`#${usage.seq}: tokens of the LLM call that wrote this (prompt ↑, completion ↓)`}>
      {' · '}↑{str(usage.prompt_tokens)} ↓{str(usage.completion_tokens)}
      {typeof usage.cost === 'number' && usage.cost > 0 ? ` · $${usage.cost.toFixed(4)}` : ''}
    </span>
  );
}

function Card({ event, className, children }: { event: AgentEvent; className?: string; children: ComponentChildren }) {
  const usage = useContext(StepUsage);
  return (
    <div class={`event event-${event.kind} ${className ?? ''}`} data-seq={event.seq} data-kind={event.kind} id={`seq-${event.seq}`}>
      <span class="event-meta" title={event.timestamp}>
        #{event.seq} · {time(event)}
        {event.agent ? ` · ${event.agent}` : ''}
        {usage ? <UsageOfStep usage={usage} /> : null}
      </span>
      {children}
    </div>
  );
}

function ActionArguments({ event }: { event: AgentEvent }) {
  const args = (event.arguments ?? {}) as Record<string, unknown>;
  if (event.tool_name === 'bash') return <pre class="command">$ {str(args.command)}</pre>;
  if (event.tool_name === 'file_editor') {
    const diff = editDiff(args);
    return (
      <div>
        <div class="edit-path">
          {str(args.command)} <code>{str(args.path)}</code>
        </div>
        {diff ? <Diff lines={diff} /> : null}
      </div>
    );
  }
  if (event.tool_name === 'task') return <div class="task-prompt">{str(args.description) || str(args.prompt)}</div>;
  if (event.tool_name === 'finish') return <Markdown text={str(args.message)} />;
  return <pre class="arguments">{JSON.stringify(args, null, 2)}</pre>;
}

function Observation({ event }: { event: AgentEvent }) {
  const data = (event.data ?? {}) as Record<string, unknown>;
  const facts: string[] = [];
  if (data.exit_code !== undefined && data.exit_code !== null) facts.push(`exit ${str(data.exit_code)}`);
  if (data.timed_out === true) facts.push('timed out');
  if (data.cwd) facts.push(str(data.cwd));
  if (data.path && !data.cwd) facts.push(str(data.path));
  return (
    <Card event={event} className={event.is_error ? 'is-error' : ''}>
      <details>
        <summary>
          <span class="tool">{str(event.tool_name)}</span> output{facts.length ? ` · ${facts.join(' · ')}` : ''}
          {event.is_error ? <span class="badge badge-error">error</span> : null}
        </summary>
        <pre class="output">{str(event.content)}</pre>
      </details>
    </Card>
  );
}

/**
 * One event of the timeline; `nested` are the events of a subagent nested under its `task` call,
 * `usage` the usage of the LLM call that wrote this step.
 */
export function EventCard({ event, nested, usage }: { event: AgentEvent; nested?: ComponentChildren; usage?: AgentEvent | undefined }) {
  return (
    <StepUsage.Provider value={usage}>
      <EventBody event={event} nested={nested} />
    </StepUsage.Provider>
  );
}

function EventBody({ event, nested }: { event: AgentEvent; nested?: ComponentChildren }) {
  switch (event.kind) {
    case 'system_prompt':
      return (
        <Card event={event}>
          <details>
            <summary>System prompt · {Array.isArray(event.tools) ? event.tools.length : 0} tools</summary>
            <pre class="output">{str(event.content)}</pre>
          </details>
        </Card>
      );
    case 'message':
      return (
        <Card event={event} className={`message-${event.source}`}>
          <div class="who">
            {event.source === 'user' ? 'You' : 'Agent'}
            {event.multitask_strategy && event.multitask_strategy !== 'enqueue' ? <span class="subtle"> · sent during a run ({str(event.multitask_strategy)})</span> : null}
          </div>
          {event.source === 'user' ? <div class="plain">{str(event.content)}</div> : <Markdown text={str(event.content)} />}
        </Card>
      );
    case 'action':
      return (
        <Card event={event}>
          {event.thought ? <Markdown text={str(event.thought)} /> : null}
          <div class="action-head">
            <span class="tool">{str(event.tool_name)}</span>
          </div>
          <ActionArguments event={event} />
          {nested ? <div class="nested">{nested}</div> : null}
        </Card>
      );
    case 'observation':
      return <Observation event={event} />;
    case 'rejection':
      return (
        <Card event={event} className="is-error">
          Rejected <span class="tool">{str(event.tool_name)}</span>
          {event.reason ? `: ${str(event.reason)}` : ''}
        </Card>
      );
    case 'state_update':
      return (
        <Card event={event} className="quiet">
          status → <span class={`status status-${str(event.status)}`}>{str(event.status)}</span>
          {event.reason ? ` (${str(event.reason)})` : ''}
        </Card>
      );
    case 'agent_error':
      return (
        <Card event={event} className="is-error">
          <strong>{str(event.error)}</strong>: {str(event.message)}
        </Card>
      );
    case 'reasoning':
      // Folded: the model's reasoning is there to read on demand. `provider_data` (signatures, encrypted items) is never shown.
      return (
        <Card event={event} className="quiet reasoning">
          <details>
            <summary>Reasoning{event.content ? '' : ' (not shown: llm.reasoning.show is off, or the provider gave none in text)'}</summary>
            {event.content ? <pre class="output">{str(event.content)}</pre> : null}
          </details>
        </Card>
      );
    case 'usage':
      if (event.prompt_tokens === null || event.prompt_tokens === undefined) {
        return (
          <Card event={event} className="quiet">
            tokens unknown (the provider reported no usage)
          </Card>
        );
      }
      return (
        <Card event={event} className="quiet">
          tokens ↑{str(event.prompt_tokens)} ↓{str(event.completion_tokens)}
          {typeof event.cost === 'number' && event.cost > 0 ? ` · $${event.cost.toFixed(4)}` : ''}
        </Card>
      );
    case 'condensation':
      return (
        <Card event={event} className="quiet">
          <details>
            <summary>
              Context condensed{event.forgotten_from_seq ? `: events #${str(event.forgotten_from_seq)}–#${str(event.forgotten_to_seq)} summarized` : ''}
              {typeof event.tokens_before === 'number' ? ` · ~${str(event.tokens_before)} → ~${str(event.tokens_after)} tokens` : ''}
              {event.trigger ? ` · ${event.trigger === 'manual' ? 'asked for' : event.trigger === 'context_exceeded' ? 'the prompt was too long' : 'automatic'}` : ''}
            </summary>
            <Markdown text={str(event.summary ?? event.content)} />
          </details>
        </Card>
      );
    case 'interrupt':
      return (
        <Card event={event} className="quiet">
          Interrupted by message #{str(event.message_seq)}:{' '}
          {event.stopped === 'tool' ? 'the running tool call was stopped' : event.stopped === 'llm' ? 'the answer being written was dropped' : 'the run takes the message next'}
          {Array.isArray(event.tool_call_ids) && event.tool_call_ids.length > 1 ? ` (${event.tool_call_ids.length - (event.stopped === 'tool' ? 1 : 0)} call(s) not run)` : ''}
        </Card>
      );
    case 'rollback':
      return (
        <Card event={event} className="quiet">
          Run rolled back: events <a href={`#seq-${str(event.forgotten_from_seq)}`}>#{str(event.forgotten_from_seq)}</a>–#{str(event.forgotten_to_seq)} no longer reach the model (they stay in the log)
        </Card>
      );
    case 'hook':
      return (
        <Card event={event} className={event.decision === 'block' || event.decision === 'error' ? 'is-error' : 'quiet'}>
          hook <strong>{str(event.hook_point)}</strong>
          {event.matcher ? ` [${str(event.matcher)}]` : ''} {str(event.hook)} → {str(event.decision)}
          {event.duration_ms !== undefined ? ` · ${str(event.duration_ms)} ms` : ''}
          {event.reason ? ` · ${str(event.reason)}` : ''}
        </Card>
      );
    case 'rewind':
      return (
        <Card event={event} className="quiet">
          rewound {event.files ? 'files' : ''}
          {event.files && event.conversation ? ' and ' : ''}
          {event.conversation ? 'conversation' : ''} to before #{str(event.to_seq)} · undo: checkpoint <code>{str(event.undo_checkpoint_id).slice(0, 8)}</code>
        </Card>
      );
    case 'fork':
      return (
        <Card event={event} className="quiet">
          forked from <a href={`#/c/${str(event.parent_conversation_id)}/timeline`}>{str(event.parent_conversation_id).slice(0, 8)}</a> after #{str(event.at_seq)}
          {event.copy_workdir ? ' · own copy of the workdir' : ' · same workdir'}
        </Card>
      );
    case 'mcp_refused':
      return (
        <Card event={event} className="is-error">
          MCP server <strong>{str(event.server)}</strong> ({str(event.config_source)}) refused: {str(event.reason)}
        </Card>
      );
    case 'schedule_fire':
      return (
        <Card event={event} className="quiet">
          schedule <code>{str(event.schedule_id).slice(0, 8)}</code> fired for {new Date(str(event.scheduled_for)).toLocaleString()}
        </Card>
      );
    case 'question':
      return (
        <Card event={event} className="question">
          <div class="who">Agent asks</div>
          <Markdown text={str(event.question)} />
          {Array.isArray(event.options) && event.options.length ? <div class="options">Options: {event.options.map(str).join(' · ')}</div> : null}
        </Card>
      );
    default:
      return (
        <Card event={event} className="quiet">
          <details>
            <summary>{event.kind}</summary>
            <pre class="output">{JSON.stringify(event, null, 2)}</pre>
          </details>
        </Card>
      );
  }
}
