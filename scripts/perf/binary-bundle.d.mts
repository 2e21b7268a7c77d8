/** esbuild options of the single executable's bundle (see binary-bundle.mjs). */
export declare const BINARY_BUNDLE_OPTIONS: { readonly minifyWhitespace: boolean };
