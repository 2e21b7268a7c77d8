// The HTML worker's program in the single executable (scripts/build-binary.mjs bundles this file,
// turndown and domino into one script, a SEA asset that html-converter.ts evaluates in the worker):
// there is no node_modules beside the binary to load them from.
import { htmlWorkerMain, type HtmlLibraries } from './html-worker-main.js';

htmlWorkerMain(require, () => ({ TurndownService: require('turndown') as HtmlLibraries['TurndownService'], domino: require('@mixmark-io/domino') as HtmlLibraries['domino'] }));
