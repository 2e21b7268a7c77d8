// Copies the non-TypeScript files the server reads at run time (prompts, tool descriptions)
// from src/ to dist/, next to the compiled modules that read them.
import fs from 'node:fs';
import path from 'node:path';

const ASSET = /\.(md|txt)$/;

function copy(from, to) {
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) copy(source, target);
    else if (ASSET.test(entry.name)) {
      fs.mkdirSync(to, { recursive: true });
      fs.copyFileSync(source, target);
    }
  }
}

copy('src', 'dist');
