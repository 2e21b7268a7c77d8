// `npm run openapi`: writes openapi/openapi.json from the built server's routes, and
// openapi/asyncapi.json (the SSE streams and webhook payloads) from the same zod schemas.
import fs from 'node:fs';
import { generateAsyncApi } from '../dist/http/asyncapi-document.js';
import { generateOpenApi } from '../dist/cli/openapi-document.js';
import { VERSION } from '../dist/version.js';

const document = await generateOpenApi();
fs.mkdirSync('openapi', { recursive: true });
fs.writeFileSync('openapi/openapi.json', `${JSON.stringify(document, null, 2)}\n`);
console.log(`openapi/openapi.json: ${Object.keys(document.paths ?? {}).length} paths`);
const asyncApi = generateAsyncApi({ version: VERSION });
fs.writeFileSync('openapi/asyncapi.json', `${JSON.stringify(asyncApi, null, 2)}\n`);
console.log(`openapi/asyncapi.json: ${Object.keys(asyncApi.components.messages).length} messages`);
