// The data dir's files: keys, the lock on a data dir in use, free space, and the workdirs agentd makes.
// The file stores and the event log are wired by storage/ (createStorage).
export { DataDirInUseError, DataDirLock } from './data-dir-lock.js';
export { DiskSpace } from './disk-space.js';
export { HostWorkdirs } from './host-workdirs.js';
export { loadOrCreateKeyFile, loadServerKeys } from './key-file.js';
export { writeFileAtomic, writeFileAtomicAsync, type AtomicWriteOptions } from './atomic-write.js';
