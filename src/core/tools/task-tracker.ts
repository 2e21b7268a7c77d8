import { z } from 'zod';
import { loadDescription } from './load-description.js';
import { defineTool, type ToolResult } from './tool.js';

export const TASK_TRACKER_TOOL_NAME = 'task_tracker';
/** Where the list lives in `ToolContext.state`. */
export const TASK_LIST_STATE_KEY = 'task_tracker.tasks';
const MAX_TASKS = 100;

export const taskStatusSchema = z.enum(['todo', 'in_progress', 'done']);

export const taskSchema = z.object({
  id: z.string().min(1).max(64).optional().describe('Stable id of the task; assigned when omitted.'),
  title: z.string().min(1).max(500).describe('What is to be done, in a few words.'),
  status: taskStatusSchema.describe('todo, in_progress or done.'),
  notes: z.string().max(2000).optional().describe('Optional details: findings, blockers, what is left.'),
});

export const taskTrackerParameters = z.object({
  command: z.enum(['view', 'plan']).describe('`plan` replaces the whole list with `tasks`; `view` shows it.'),
  tasks: z
    .array(taskSchema)
    .max(MAX_TASKS)
    .optional()
    .describe('For `plan`: the complete new list, in order (every task, with its current status).'),
});

/** A task as stored: its id is always set. */
export type Task = z.infer<typeof taskSchema> & { id: string };

const storedTaskListSchema = z.array(taskSchema.extend({ id: z.string().min(1) }));

/**
 * Restores the list from a task_tracker observation's `data` (the runtime replays the last
 * one after a restart). Returns undefined when `data` does not carry a valid list.
 */
export function restoreTaskList(data: unknown): Task[] | undefined {
  if (typeof data !== 'object' || data === null || !('tasks' in data)) return undefined;
  const parsed = storedTaskListSchema.safeParse((data as { tasks: unknown }).tasks);
  return parsed.success ? (parsed.data as Task[]) : undefined;
}

/** The current list kept in a conversation's tool state (empty when none). */
export function getTaskList(state: Map<string, unknown>): Task[] {
  const stored = state.get(TASK_LIST_STATE_KEY);
  return Array.isArray(stored) ? (stored as Task[]) : [];
}

export const taskTrackerTool = defineTool({
  name: TASK_TRACKER_TOOL_NAME,
  description: loadDescription(import.meta.url, 'task-tracker.md'),
  parameters: taskTrackerParameters,
  async execute(input, context): Promise<ToolResult> {
    if (input.command === 'view') return renderResult(getTaskList(context.state), 'Current task list');
    if (!input.tasks) {
      return { isError: true, content: '`plan` needs `tasks`: the complete list (send [] to clear it).' };
    }
    const ids = new Set(input.tasks.flatMap((task) => (task.id ? [task.id] : [])));
    if (ids.size !== input.tasks.filter((task) => task.id).length) {
      return { isError: true, content: 'Task ids must be unique; two tasks share the same id.' };
    }
    let next = 1;
    const tasks: Task[] = input.tasks.map((task) => {
      if (task.id) return { ...task, id: task.id };
      while (ids.has(String(next))) next++;
      ids.add(String(next));
      return { ...task, id: String(next) };
    });
    context.state.set(TASK_LIST_STATE_KEY, tasks);
    return renderResult(tasks, 'Task list updated');
  },
});

function renderResult(tasks: Task[], heading: string): ToolResult {
  return { content: formatTaskList(tasks, heading), isError: false, data: { tasks } };
}

const STATUS_MARKS: Record<Task['status'], string> = { todo: '[ ]', in_progress: '[~]', done: '[x]' };

export function formatTaskList(tasks: Task[], heading = 'Task list'): string {
  if (tasks.length === 0) return `${heading}: (empty)`;
  const done = tasks.filter((task) => task.status === 'done').length;
  const lines = tasks.map((task) => {
    const notes = task.notes ? `\n      notes: ${task.notes.replace(/\n/g, '\n      ')}` : '';
    return `${STATUS_MARKS[task.status]} ${task.title} (id: ${task.id}, ${task.status})${notes}`;
  });
  return `${heading} (${done}/${tasks.length} done):\n${lines.join('\n')}`;
}
