import { describe, expect, it } from 'vitest';
import { FINISH_TOOL_NAME, finishTool } from '../../src/core/tools/finish.js';
import {
  getTaskList,
  restoreTaskList,
  TASK_LIST_STATE_KEY,
  taskTrackerParameters,
  taskTrackerTool,
} from '../../src/core/tools/task-tracker.js';
import type { ToolContext } from '../../src/core/tools/tool.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';

function makeContext(): ToolContext {
  return {
    conversationId: 'c-test',
    workdir: '/nonexistent',
    workdirFs: new NodeWorkdirFileSystem(),
    signal: new AbortController().signal,
    shell: () => Promise.reject(new Error('no shell')),
    state: new Map(),
  };
}

describe('task_tracker', () => {
  it('plans, assigns missing ids, views, and carries the full list in data', async () => {
    const context = makeContext();
    const empty = await taskTrackerTool.execute({ command: 'view' }, context);
    expect(empty.content).toContain('(empty)');

    const input = taskTrackerParameters.parse({
      command: 'plan',
      tasks: [
        { id: '1', title: 'Read the code', status: 'done' },
        { title: 'Fix the bug', status: 'in_progress', notes: 'in parser.ts' },
        { title: 'Run the tests', status: 'todo' },
      ],
    });
    const planned = await taskTrackerTool.execute(input, context);
    expect(planned.isError).toBe(false);
    expect(planned.content).toContain('(1/3 done)');
    expect(planned.content).toContain('[~] Fix the bug (id: 2, in_progress)');
    const tasks = (planned.data as { tasks: unknown[] }).tasks;
    expect(tasks).toHaveLength(3);
    expect(tasks.map((task) => (task as { id: string }).id)).toEqual(['1', '2', '3']);

    const viewed = await taskTrackerTool.execute({ command: 'view' }, context);
    expect(viewed.content).toContain('[x] Read the code');
    expect(viewed.data).toEqual(planned.data);
  });

  it('restores the list from an observation and rejects junk', async () => {
    const planned = await taskTrackerTool.execute(
      { command: 'plan', tasks: [{ title: 'Only task', status: 'todo' }] },
      makeContext(),
    );
    const restored = restoreTaskList(planned.data);
    expect(restored).toEqual([{ id: '1', title: 'Only task', status: 'todo' }]);
    // A fresh context given the restored list (as the runtime does after a restart): the tool
    // itself sees it, and a new plan continues from it.
    const context = makeContext();
    context.state.set(TASK_LIST_STATE_KEY, restored);
    const viewed = await taskTrackerTool.execute({ command: 'view' }, context);
    expect(viewed.isError).toBe(false);
    expect(viewed.content).toContain('Only task');
    expect(viewed.data).toEqual(planned.data);
    expect(getTaskList(makeContext().state)).toEqual([]);
    expect(restoreTaskList({ tasks: [{ title: 'x', status: 'bogus', id: '1' }] })).toBeUndefined();
    expect(restoreTaskList(null)).toBeUndefined();
    expect(restoreTaskList({ exit_code: 0 })).toBeUndefined();
  });

  it('reports a plan without tasks and duplicate ids as errors', async () => {
    expect((await taskTrackerTool.execute({ command: 'plan' }, makeContext())).isError).toBe(true);
    const duplicate = await taskTrackerTool.execute(
      { command: 'plan', tasks: [{ id: 'a', title: 'x', status: 'todo' }, { id: 'a', title: 'y', status: 'todo' }] },
      makeContext(),
    );
    expect(duplicate.isError).toBe(true);
  });
});

describe('finish', () => {
  it('returns the message and marks the run finished', async () => {
    expect(await finishTool.execute({ message: 'All done.' }, makeContext())).toEqual({
      content: 'All done.',
      isError: false,
      data: { finished: true },
    });
    // The loop recognises it by name: the tool it would look for is this one.
    expect(finishTool.name).toBe(FINISH_TOOL_NAME);
    // Without a message there is nothing to tell the user: the arguments are refused.
    expect(finishTool.parameters.safeParse({}).success).toBe(false);
  });
});
