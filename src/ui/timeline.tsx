import { Component, type ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { EventCard, Markdown } from './event-card.js';
import type { TimelineStore } from './timeline-store.js';
import type { AgentEvent } from './types.js';

/** Subagent events grouped under the `task` call that ran them (`parent_tool_call_id`). */
function nest(events: AgentEvent[]): { top: AgentEvent[]; children: Map<string, AgentEvent[]> } {
  const children = new Map<string, AgentEvent[]>();
  const top: AgentEvent[] = [];
  for (const event of events) {
    const parent = event.parent_tool_call_id;
    if (typeof parent === 'string' && parent) {
      const list = children.get(parent) ?? [];
      list.push(event);
      children.set(parent, list);
    } else top.push(event);
  }
  return { top, children };
}

/** What an LLM answer writes: the step its `usage` event (recorded just before it) belongs to. */
function isStep(event: AgentEvent | undefined): boolean {
  if (!event) return false;
  return event.kind === 'action' || event.kind === 'question' || event.kind === 'reasoning' || event.kind === 'condensation' || (event.kind === 'message' && event.source === 'agent');
}

function renderEvents(events: AgentEvent[], children: Map<string, AgentEvent[]>): ComponentChildren {
  // A usage line between every step is noise: each is shown in the step right after it; one
  // with no step after it (not arrived yet, or the call failed) keeps a line of its own.
  return events.map((event, index) => {
    if (event.kind === 'usage' && isStep(events[index + 1])) return null;
    const usage = isStep(event) && events[index - 1]?.kind === 'usage' ? events[index - 1] : undefined;
    const callId = event.kind === 'action' && typeof event.tool_call_id === 'string' ? event.tool_call_id : null;
    const inner = callId ? children.get(callId) : undefined;
    return <EventCard key={event.seq} event={event} usage={usage} nested={inner ? renderEvents(inner, children) : undefined} />;
  });
}

/** Re-renders only when the events change, not on every streamed delta. */
class EventList extends Component<{ events: AgentEvent[] }> {
  override shouldComponentUpdate(next: { events: AgentEvent[] }): boolean {
    return next.events !== this.props.events;
  }

  override render() {
    const { top, children } = nest(this.props.events);
    // Subagent events whose `task` call is not loaded (an older page) stay visible at top level.
    const known = new Set(top.filter((event) => event.kind === 'action').map((event) => event.tool_call_id as string));
    const orphans = [...children.entries()].filter(([parent]) => !known.has(parent)).flatMap(([, list]) => list);
    const shown = orphans.length ? [...top, ...orphans].sort((a, b) => a.seq - b.seq) : top;
    return <div class="events">{renderEvents(shown, children)}</div>;
  }
}

export function Timeline({ store }: { store: TimelineStore }) {
  const [, setVersion] = useState(0);
  const scroller = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  const anchor = useRef<{ height: number; top: number; count: number } | null>(null);

  useEffect(() => store.subscribe(() => setVersion((version) => version + 1)), [store]);

  useLayoutEffect(() => {
    const element = scroller.current;
    if (!element) return;
    if (anchor.current && anchor.current.count !== store.events.length) {
      // Older events landed above: keep what the reader was looking at in place.
      element.scrollTop = anchor.current.top + (element.scrollHeight - anchor.current.height);
      anchor.current = null;
    } else if (pinned.current && !anchor.current) element.scrollTop = element.scrollHeight;
  });

  const onScroll = () => {
    const element = scroller.current;
    if (!element) return;
    pinned.current = element.scrollHeight - element.scrollTop - element.clientHeight < 40;
    if (element.scrollTop < 200 && store.hasOlder && !store.loadingOlder) {
      anchor.current = { height: element.scrollHeight, top: element.scrollTop, count: store.events.length };
      void store.loadOlder().finally(() => {
        if (anchor.current?.count === store.events.length) anchor.current = null;
      });
    }
  };

  return (
    <div class="timeline" ref={scroller} onScroll={onScroll} data-testid="timeline">
      {store.hasOlder ? (
        <button class="link older" onClick={() => void store.loadOlder()} disabled={store.loadingOlder}>
          {store.loadingOlder ? 'Loading older events…' : 'Load older events'}
        </button>
      ) : null}
      {store.error ? <div class="error-box">{store.error}</div> : null}
      <EventList events={store.events} />
      {store.streaming ? (
        <div class="event event-message message-agent streaming" data-testid="streaming">
          <div class="who">Agent (typing…)</div>
          <Markdown text={store.streaming} />
        </div>
      ) : null}
      {store.deleted ? <div class="error-box">This conversation was deleted.</div> : null}
    </div>
  );
}
