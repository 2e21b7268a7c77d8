import type { Plugin } from 'esbuild';

/** Stands in, in the bundles, for packages required for what the server never uses (see stand-ins.mjs). */
export declare const leftOut: Plugin;
/** Stands in, in the bundles, for packages required at a module's top but used only on some request: loaded at first use. */
export declare const onDemand: Plugin;
