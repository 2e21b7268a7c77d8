/** Where conversations' workdirs are made ready and removed: the file system, behind a port (see adapters/host-workdirs.ts). */
export interface Workdirs {
  /**
   * Makes `requested` (an absolute path) a directory the conversation may use and returns its
   * real path and whether it was created. Refused (`invalid_workdir`) when it is not absolute,
   * is a file, or holds or lies in the server's data dir (unless under the workdir base).
   */
  prepare(requested: string, options: { isDefault: boolean }): { workdir: string; created: boolean };
  /** Removes a workdir the server created, with everything in it. */
  /** Asynchronous: a workdir of a hundred thousand files must not stall every other request. */
  remove(workdir: string): Promise<void>;
}
