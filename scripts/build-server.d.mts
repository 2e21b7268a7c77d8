import type { Plugin } from 'esbuild';

/** Stands in, in the bundles, for packages required for what the server never uses (see build-server.mjs). */
export declare const leftOut: Plugin;
