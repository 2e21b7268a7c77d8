/** The Node options the server runs with (see server-node-flags.mjs). */
export declare const SERVER_NODE_FLAGS: readonly string[];
