import { useEffect, useState } from 'preact/hooks';
import type { Api } from './api.js';
import type { Page } from './types.js';
import { useAction } from './use-action.js';

interface Schedule {
  id: string;
  cron: string | null;
  every: string | null;
  timezone: string;
  status: string;
  status_reason: string | null;
  next_fire_at: string | null;
  overlap: string;
  fires_count: number;
  message: { content: unknown };
}

interface Fire {
  id: string;
  scheduled_for: string;
  outcome: string | null;
  reason: string | null;
  manual: boolean;
}

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : '—');

/** The last outcomes of a schedule, newest first: one record per slot. */
function LastFires({ api, scheduleId }: { api: Api; scheduleId: string }) {
  const [fires, setFires] = useState<Fire[] | null>(null);
  const action = useAction();
  useEffect(() => {
    void action.run(async () => setFires((await api.get<Page<Fire>>(`/schedules/${scheduleId}/fires`, { limit: 5 })).items));
  }, [scheduleId]);
  if (action.error) return <div class="error-text">{action.error}</div>;
  if (!fires) return <div class="subtle">Loading fires…</div>;
  if (fires.length === 0) return <div class="subtle">Not fired yet.</div>;
  return (
    <ul class="fires" data-testid="fires">
      {fires.map((fire) => (
        <li key={fire.id} title={fire.reason ?? ''} data-outcome={fire.outcome ?? 'claimed'}>
          <span class={`badge ${fire.outcome === 'failed' ? 'badge-error' : ''}`}>{fire.outcome ?? 'starting'}</span> <span class="subtle">{when(fire.scheduled_for)}{fire.manual ? ' (manual)' : ''}</span>
          {fire.reason ? <span class="subtle"> · {fire.reason}</span> : null}
        </li>
      ))}
    </ul>
  );
}

/** The schedules that send messages to this conversation: their rule, next fire and last outcomes. */
export function SchedulesPanel({ api, conversationId }: { api: Api; conversationId: string }) {
  const [schedules, setSchedules] = useState<Schedule[] | null>(null);
  const [version, setVersion] = useState(0);
  const action = useAction();
  const load = () =>
    action.run(async () => {
      setSchedules((await api.get<Page<Schedule>>('/schedules', { conversation_id: conversationId, limit: 100 })).items);
      setVersion((value) => value + 1);
    });
  useEffect(() => {
    void load();
  }, [conversationId]);
  const act = (id: string, verb: 'pause' | 'resume' | 'trigger') => action.run(async () => (await api.post(`/schedules/${id}/${verb}`), await load()));

  return (
    <section class="panel" data-testid="schedules">
      <h3>Schedules</h3>
      {action.error ? <div class="error-text">{action.error}</div> : null}
      {schedules && schedules.length === 0 ? <div class="subtle">No schedules send messages to this conversation.</div> : null}
      {(schedules ?? []).map((schedule) => (
        <div class="callback" key={schedule.id} data-testid="schedule" data-id={schedule.id}>
          <div class="row">
            <code>{schedule.cron ?? `every ${schedule.every}`}</code>
            <span class="subtle">{schedule.timezone}</span>
            <span class={`badge ${schedule.status === 'failing' ? 'badge-error' : ''}`} data-testid="schedule-status">
              {schedule.status}
            </span>
            <span class="subtle" data-testid="next-fire">
              next: {when(schedule.next_fire_at)}
            </span>
            <span class="spacer" />
            {schedule.status === 'active' ? (
              <button class="link" onClick={() => act(schedule.id, 'pause')}>
                pause
              </button>
            ) : null}
            {schedule.status === 'paused' ? (
              <button class="link" onClick={() => act(schedule.id, 'resume')}>
                resume
              </button>
            ) : null}
            {schedule.status !== 'failing' ? (
              <button class="link" onClick={() => act(schedule.id, 'trigger')}>
                run now
              </button>
            ) : null}
          </div>
          {schedule.status_reason ? <div class="subtle">{schedule.status_reason}</div> : null}
          <LastFires key={`${schedule.id}-${version}`} api={api} scheduleId={schedule.id} />
        </div>
      ))}
    </section>
  );
}
