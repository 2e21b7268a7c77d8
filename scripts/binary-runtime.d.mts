export declare const NODE_RUNTIME_VERSION: string;
export declare function runtimePackage(version?: string): string;
export declare function ensureRuntime(options: { root: string; version?: string }): string;
