// `npm run openapi`: writes openapi/openapi.json from the built server's routes.
import fs from 'node:fs';
import { generateOpenApi } from '../dist/openapi-document.js';

const document = await generateOpenApi();
fs.mkdirSync('openapi', { recursive: true });
fs.writeFileSync('openapi/openapi.json', `${JSON.stringify(document, null, 2)}\n`);
console.log(`openapi/openapi.json: ${Object.keys(document.paths ?? {}).length} paths`);
