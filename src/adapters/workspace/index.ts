// Files inside a workdir, reached through pinned directory handles that never follow a link out of it.
import type { Config } from '../../config.js';
import { CatalogCache } from '../../core/catalog/catalog-cache.js';
import { mayHoldProjectCatalog, type ProjectCatalog } from '../../core/catalog/project-catalog.js';
import { workspaceCatalogFiles } from '../../core/catalog/workspace-catalog-files.js';
import type { ConversationRecord } from '../../core/conversations/conversation-record.js';
import { WorkspaceFiles } from '../../core/workspace/workspace-files.js';
import { HostProjectFiles } from './host-project-files.js';
import { NodeWorkdirFileSystem } from './node-workdir-file-system.js';

export { HostProjectFiles } from './host-project-files.js';
export { NodeWorkdirFileSystem } from './node-workdir-file-system.js';

/**
 * The conversations' workdirs: their files (masked as they are read) and the catalog of skills,
 * agents and commands read from them: the server's skills directory for every conversation, a
 * workdir's own catalog when its conversation reads project settings and the workdir may hold
 * one (mayHoldProjectCatalog).
 */
export function createWorkspace(
  config: Pick<Config, 'skillsDir'>,
  deps: { workdirOf: (conversationId: string) => string; maskText: (conversationId: string, text: string) => string },
): {
  workdirFs: NodeWorkdirFileSystem;
  projectFiles: HostProjectFiles;
  files: WorkspaceFiles;
  catalogs: CatalogCache;
  catalogOf: (record: ConversationRecord) => Promise<ProjectCatalog>;
} {
  const workdirFs = new NodeWorkdirFileSystem();
  const projectFiles = new HostProjectFiles();
  const files = new WorkspaceFiles({ workdirFs, workdirOf: deps.workdirOf, maskText: deps.maskText });
  const { skillsDir } = config;
  const server = skillsDir ? workspaceCatalogFiles({ files: new WorkspaceFiles({ workdirFs, workdirOf: () => skillsDir }), key: 'server', root: skillsDir }) : null;
  const catalogs = new CatalogCache({ stamp: (file) => projectFiles.stamp(file), now: () => Date.now(), server });
  const catalogOf = (record: ConversationRecord) =>
    catalogs.load(record.id, {
      project: (record.setting_sources ?? ['project']).includes('project') && mayHoldProjectCatalog(projectFiles, record.workdir) ? workspaceCatalogFiles({ files, key: record.id, root: record.workdir }) : null,
      agents: record.agents,
    });
  return { workdirFs, projectFiles, files, catalogs, catalogOf };
}
