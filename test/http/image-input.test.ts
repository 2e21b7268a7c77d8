import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { tempDir } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';

// Small real images: a 1x1 PNG and the first bytes of a JPEG (the type is read from the bytes).
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46]), Buffer.alloc(40, 7)]);

let harness: AgentHarness;
let base: string;
let workdir: string;
let id: string;
beforeAll(async () => {
  harness = await startAgentHarness();
  base = tempDir('agentd-images-');
  workdir = path.join(base, 'work');
  fs.mkdirSync(path.join(workdir, 'shots'), { recursive: true });
  fs.writeFileSync(path.join(workdir, 'shots', 'screen.png'), PNG);
  fs.writeFileSync(path.join(workdir, 'notes.txt'), 'not an image');
  fs.writeFileSync(path.join(workdir, 'huge.png'), Buffer.concat([PNG, Buffer.alloc(5 * 1024 * 1024)]));
  fs.writeFileSync(path.join(base, 'outside.png'), PNG);
  fs.symlinkSync(path.join(base, 'outside.png'), path.join(workdir, 'link.png'));
  id = await harness.createConversation({ workdir });
});
afterAll(async () => harness?.close());

describe('image inputs', () => {
  it('sends a workdir image and an inline one to the LLM as image_url data URLs; the event keeps the path, not the bytes', async () => {
    const from = harness.llm.requests.length;
    harness.llm.setScript([{ toolCalls: [{ name: 'glob', arguments: { pattern: '*.png' } }] }, { text: 'A tiny picture.' }]);
    const sent = await harness.post(`/conversations/${id}/messages`, {
      content: [
        { type: 'text', text: 'What do these show?' },
        { type: 'image', path: 'shots/screen.png' },
        { type: 'image', data: JPEG.toString('base64'), media_type: 'image/jpeg' },
      ],
    });
    expect(sent.status).toBe(202);
    expect(sent.body.event.content).toBe(`What do these show?\n\n[image: shots/screen.png]\n\n[image: image/jpeg, ${JPEG.length} bytes]`);
    expect(sent.body.event.parts).toEqual([
      { type: 'text', text: 'What do these show?' },
      { type: 'image', path: 'shots/screen.png', media_type: 'image/png', size_bytes: PNG.length },
      { type: 'image', data: JPEG.toString('base64'), media_type: 'image/jpeg', size_bytes: JPEG.length },
    ]);
    await harness.waitForStatus(id, ['idle']);
    const expected = [
      { type: 'text', text: 'What do these show?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG.toString('base64')}` } },
      { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG.toString('base64')}` } },
    ];
    // Both turns of the run send the images (the second after the glob call).
    const requests = harness.llm.requests.slice(from);
    expect(requests).toHaveLength(2);
    for (const request of requests) expect(request.body.messages!.find((message) => message.role === 'user' && Array.isArray(message.content))!.content).toEqual(expected);
    expect(harness.llm.violations).toEqual([]);

    // Stored: the workdir image by path only.
    const stored = (await harness.events(id)).find((event) => event.kind === 'message' && event.parts);
    expect(JSON.stringify(stored)).not.toContain(PNG.toString('base64'));
    // The conversation's files (its events, record, runs); the workdir checkpoints' shadow repository is a directory beside them.
    const dir = path.join(harness.server.dataDir, 'conversations', id);
    const files = fs.readdirSync(dir, { withFileTypes: true }).filter((entry) => entry.isFile());
    expect(files.map((entry) => entry.name)).toContain('events.jsonl');
    const log = files.map((entry) => fs.readFileSync(path.join(dir, entry.name)).toString('latin1')).join('');
    expect(log).not.toContain(PNG.toString('base64'));
  });

  it('describes a workdir image that is gone by the next run instead of failing', async () => {
    fs.copyFileSync(path.join(workdir, 'shots', 'screen.png'), path.join(workdir, 'temp.png'));
    harness.llm.setScript([{ text: 'seen' }, { text: 'still fine' }]);
    await harness.post(`/conversations/${id}/messages`, { content: [{ type: 'text', text: 'look' }, { type: 'image', path: 'temp.png' }] });
    await harness.waitForStatus(id, ['idle']);
    fs.rmSync(path.join(workdir, 'temp.png'));
    await harness.post(`/conversations/${id}/messages`, { content: 'and now?' });
    await harness.waitForStatus(id, ['idle']);
    const last = harness.llm.requests.at(-1)!.body.messages!.filter((message) => message.role === 'user' && Array.isArray(message.content)).at(-1)!;
    expect((last.content as any[])[1]).toMatchObject({ type: 'text', text: expect.stringMatching(/^\[image temp\.png: no longer readable/) });
    expect(harness.llm.violations).toEqual([]);
  });

  it('refuses bad images with clear errors, before anything is recorded', async () => {
    const count = (await harness.get(`/conversations/${id}/events/count`)).body.count;
    const send = (content: unknown) => harness.post(`/conversations/${id}/messages`, { content });
    expectError(await send([{ type: 'image', path: 'notes.txt' }]), { status: 400, error: 'unsupported_image', message: /^content\[0\]: "notes\.txt" is not a PNG, JPEG, GIF or WebP image\.$/ });
    expectError(await send([{ type: 'image', path: 'huge.png' }]), { status: 413, error: 'image_too_large', message: /^content\[0\] \(huge\.png\) is \d+ bytes; an image may have at most 5242880 bytes/ });
    expectError(await send([{ type: 'image', path: 'missing.png' }]), { status: 404, error: 'path_not_found', message: /missing\.png/ });
    const escape = await send([{ type: 'image', path: '../outside.png' }]);
    expect([400, 403]).toContain(escape.status);
    const link = await send([{ type: 'image', path: 'link.png' }]);
    expect([400, 403]).toContain(link.status);
    expect(JSON.stringify([escape.body, link.body])).not.toContain(PNG.toString('base64'));
    expectError(await send([{ type: 'image', data: 'not base64!', media_type: 'image/png' }]), { status: 400, error: 'invalid_image_data', message: /^content\[0\]\.data is not base64/ });
    expectError(await send([{ type: 'image', data: JPEG.toString('base64'), media_type: 'image/png' }]), { status: 400, error: 'image_type_mismatch', message: /^content\[0\] says image\/png but its bytes are image\/jpeg\.$/ });
    expectError(await send(Array.from({ length: 11 }, () => ({ type: 'image', data: PNG.toString('base64'), media_type: 'image/png' }))), { status: 400, error: 'too_many_images', message: /at most 10 images/ });
    expectError(await send([{ type: 'video', path: 'a.mp4' }]), { status: 400, error: 'validation_error', message: /content/ });
    expectError(await send([]), { status: 400, error: 'validation_error', message: /content/ });
    expect((await harness.get(`/conversations/${id}/events/count`)).body.count).toBe(count);
  });
});
