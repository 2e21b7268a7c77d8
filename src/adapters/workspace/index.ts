// Files inside a workdir, reached through pinned directory handles that never follow a link out of it.
export { HostProjectFiles } from './host-project-files.js';
export { NodeWorkdirFileSystem } from './node-workdir-file-system.js';
