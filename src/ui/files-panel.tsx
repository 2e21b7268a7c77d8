import { useEffect, useRef, useState } from 'preact/hooks';
import { filePath, type Api, type Features } from './api.js';
import { Diff } from './event-card.js';
import { unifiedLines } from './file-diff.js';
import type { FileEntry, Page } from './types.js';
import { useAction } from './use-action.js';
import { formatBytes } from './widgets.js';

interface Change {
  path: string;
  status: string;
  diff?: string;
}

function ChangedFiles({ api, conversationId }: { api: Api; conversationId: string }) {
  const [changes, setChanges] = useState<Change[] | null>(null);
  const action = useAction();
  const load = () => action.run(async () => setChanges((await api.get<Page<Change> | { items: Change[] }>(`/conversations/${conversationId}/changes`)).items));
  useEffect(() => {
    void load();
  }, [conversationId]);
  return (
    <section class="panel" data-testid="changes">
      <h3>
        Changed files <button class="link" onClick={() => void load()}>refresh</button>
      </h3>
      {action.error ? <div class="error-text">{action.error}</div> : null}
      {changes?.length === 0 ? <div class="subtle">No changes since the conversation started.</div> : null}
      {changes?.map((change) => (
        <details key={change.path}>
          <summary>
            <span class={`change change-${change.status}`}>{change.status}</span> <code>{change.path}</code>
          </summary>
          {change.diff ? <Diff lines={unifiedLines(change.diff)} /> : null}
        </details>
      ))}
    </section>
  );
}

export function FilesPanel({ api, features, conversationId }: { api: Api; features: Features; conversationId: string }) {
  const [dir, setDir] = useState('.');
  const [entries, setEntries] = useState<FileEntry[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [dragging, setDragging] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const input = useRef<HTMLInputElement>(null);
  const action = useAction();

  const list = (pageId?: string) =>
    action.run(async () => {
      const page = await api.get<Page<FileEntry>>(`/conversations/${conversationId}/files`, { path: dir, limit: 200, page_id: pageId });
      setEntries((current) => (pageId ? [...current, ...page.items] : page.items));
      setNext(page.next_page_id);
    });

  useEffect(() => {
    void list();
  }, [conversationId, dir]);

  const upload = (files: FileList | File[]) =>
    action.run(async () => {
      const form = new FormData();
      const chosen = Array.from(files);
      if (chosen.length === 0) return;
      for (const file of chosen) form.append('file', file, file.name);
      await api.request('POST', `/conversations/${conversationId}/files/upload`, form, { path: dir });
      setNotice(`Uploaded ${chosen.map((file) => file.name).join(', ')}`);
      await list();
    });

  const download = (entry: FileEntry) =>
    action.run(async () => {
      const blob = await api.download(filePath(conversationId, entry.path));
      const url = URL.createObjectURL(blob);
      const link = document.createElement('a');
      link.href = url;
      link.download = entry.name;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });

  const remove = (entry: FileEntry) => {
    if (!confirm(`Delete ${entry.path}?`)) return;
    void action.run(async () => {
      await api.delete(filePath(conversationId, entry.path));
      await list();
    });
  };

  const parts = dir === '.' ? [] : dir.split('/');
  return (
    <div class="files">
      <section
        class={`panel dropzone ${dragging ? 'dragging' : ''}`}
        data-testid="dropzone"
        onDragOver={(event) => {
          event.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(event) => {
          event.preventDefault();
          setDragging(false);
          if (event.dataTransfer?.files.length) void upload(event.dataTransfer.files);
        }}
      >
        <div class="breadcrumb">
          <button class="link" onClick={() => setDir('.')}>
            workdir
          </button>
          {parts.map((part, index) => (
            <span key={index}>
              {' / '}
              <button class="link" onClick={() => setDir(parts.slice(0, index + 1).join('/'))}>
                {part}
              </button>
            </span>
          ))}
          <span class="spacer" />
          <button onClick={() => input.current?.click()}>Upload…</button>
          <input
            ref={input}
            type="file"
            multiple
            hidden
            data-testid="upload-input"
            onChange={(event) => {
              // The element itself, not `event.currentTarget`: that is null once the handler has returned.
              const picker = event.currentTarget;
              const files = picker.files ? Array.from(picker.files) : [];
              if (files.length) void upload(files).finally(() => (picker.value = ''));
            }}
          />
        </div>
        <div class="subtle">Drop files here to upload them into this folder.</div>
        {notice ? <div class="notice">{notice}</div> : null}
        {action.error ? <div class="error-text">{action.error}</div> : null}
        <table class="file-table">
          <tbody>
            {entries.map((entry) => (
              <tr key={entry.path} data-path={entry.path}>
                <td>
                  {entry.type === 'directory' ? (
                    <button class="link" onClick={() => setDir(entry.path)}>
                      📁 {entry.name}/
                    </button>
                  ) : (
                    <span>{entry.name}</span>
                  )}
                </td>
                <td class="num">{entry.type === 'directory' ? '' : formatBytes(entry.size)}</td>
                <td class="subtle">{new Date(entry.modified_at).toLocaleString()}</td>
                <td class="actions">
                  {entry.type !== 'directory' ? (
                    <button class="link" onClick={() => void download(entry)}>
                      download
                    </button>
                  ) : null}
                  <button class="link danger" onClick={() => remove(entry)}>
                    delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {entries.length === 0 && !action.busy ? <div class="subtle">This folder is empty.</div> : null}
        {next ? (
          <button class="link" onClick={() => void list(next)}>
            more…
          </button>
        ) : null}
      </section>
      {features.changes ? <ChangedFiles api={api} conversationId={conversationId} /> : null}
    </div>
  );
}
