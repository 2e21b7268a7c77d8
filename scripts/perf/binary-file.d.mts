/** Puts the built single executable at `output` (see binary-file.mjs). */
export declare function placeBinary(built: string, output: string): void;
