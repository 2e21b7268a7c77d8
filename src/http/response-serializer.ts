import fastJsonStringify from 'fast-json-stringify';
import { z } from 'zod';
import { serializerCompiler as zodSerializerCompiler } from 'fastify-type-provider-zod';
import type { FastifySerializerCompiler } from 'fastify/types/schema.js';

type Serialize = (data: unknown) => string;
type CompilerInput = Parameters<FastifySerializerCompiler<z.ZodType>>[0];
type JsonSchema = Record<string, unknown>;

/**
 * Response bodies are written by a serializer compiled from the route's JSON schema (the one the
 * OpenAPI document shows, derived from the zod schema): properties are written in a fixed order
 * straight into the output, and those the schema does not name are left out, as zod's stripping
 * did. Checking every response with zod (a full parse, then JSON.stringify) cost more than the
 * rest of a small request. A schema JSON Schema cannot express (a transform, a cycle) keeps the
 * zod serializer.
 */
export const responseSerializerCompiler = (input: CompilerInput): Serialize => {
  // Compiled on first use: start-up compiles none of the ~150 response schemas.
  let serialize: Serialize | null = null;
  return (data) => (serialize ??= compileFromJsonSchema(input.schema) ?? (zodSerializerCompiler(input as never) as Serialize))(data);
};

const compiled = new WeakMap<object, Serialize | null>();

export function compileFromJsonSchema(schema: unknown): Serialize | null {
  if (!(schema instanceof z.ZodType)) return null;
  const known = compiled.get(schema);
  if (known !== undefined) return known;
  let serialize: Serialize | null = null;
  try {
    const json = z.toJSONSchema(schema, { io: 'output', target: 'draft-7', unrepresentable: 'throw', cycles: 'throw', reused: 'inline' }) as JsonSchema;
    const definitions = (json.definitions ?? {}) as Record<string, JsonSchema>;
    const { $schema: _schema, definitions: _definitions, ...root } = json;
    serialize = fastJsonStringify(forSerialization(root, definitions, new Set()) as never) as Serialize;
  } catch {
    serialize = null;
  }
  compiled.set(schema, serialize);
  return serialize;
}

/** What serialization needs of a node: references inlined, and `X or null` as a nullable X (no validation to pick a branch). */
function forSerialization(node: JsonSchema, definitions: Record<string, JsonSchema>, expanding: ReadonlySet<string>): JsonSchema {
  const { $ref, allOf, anyOf, oneOf, description: _description, ...rest } = node;
  if (typeof $ref === 'string') {
    const name = $ref.replace('#/definitions/', '');
    const target = definitions[name];
    if (!target || expanding.has(name)) throw new Error(`unresolvable reference ${$ref}`);
    return forSerialization({ ...target, ...rest }, definitions, new Set([...expanding, name]));
  }
  if (Array.isArray(allOf) && allOf.length === 1 && rest.type === undefined && rest.properties === undefined) {
    return forSerialization({ ...(allOf[0] as JsonSchema), ...rest }, definitions, expanding);
  }
  if (allOf !== undefined) throw new Error('allOf of several schemas');
  const union = (anyOf ?? oneOf) as JsonSchema[] | undefined;
  if (union) {
    const branches = union.map((branch) => forSerialization(branch, definitions, expanding));
    const others = branches.filter((branch) => branch.type !== 'null');
    const only = others[0];
    if (others.length === 1 && branches.length === 2 && only && typeof only.type === 'string') return { ...only, ...rest, nullable: true };
    return { ...rest, ...(byValueType(branches) ?? { anyOf: branches }) };
  }
  // Key names and value checks do not change what is written.
  const { propertyNames: _names, pattern: _pattern, ...kept } = rest;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(kept)) {
    if (VALUE_KEYWORDS.has(key)) out[key] = value;
    else if (key === 'properties' && isSchema(value)) out[key] = Object.fromEntries(Object.entries(value).map(([name, property]) => [name, forSerialization(property as JsonSchema, definitions, expanding)]));
    else if (Array.isArray(value)) out[key] = value.map((item) => (isSchema(item) ? forSerialization(item, definitions, expanding) : item));
    else if (isSchema(value)) out[key] = forSerialization(value, definitions, expanding);
    else out[key] = value;
  }
  return out;
}

/** Types a value's own `typeof` (or Array.isArray) tells apart. */
const PLAIN_TYPES = new Set(['boolean', 'string', 'number', 'integer', 'null', 'array']);

/**
 * A union of plain values (`true` or `"host"`, a boolean or a list of names) as one schema with a
 * list of types: the serializer then writes each value by the type it has. A union fast-json-stringify
 * keeps picks its branch with a validator, compiled from the whole response schema at the first
 * value it writes and run at every one after (a conversation's `sandbox.network` made the first
 * POST /conversations of a server compile one for the whole Conversation schema). Null when a
 * branch is an object, or two share a type: those stay a union.
 */
function byValueType(branches: JsonSchema[]): JsonSchema | null {
  const types = branches.map((branch) => branch.type);
  if (!types.every((type): type is string => typeof type === 'string' && PLAIN_TYPES.has(type)) || new Set(types).size !== types.length) return null;
  // `const` and `enum` only check a value; an array's items say how it is written.
  const items = branches.find((branch) => branch.type === 'array')?.items;
  return { type: types, ...(items !== undefined && { items }) };
}

/** Keywords whose value is data, not a schema. */
const VALUE_KEYWORDS = new Set(['enum', 'const', 'required', 'default', 'examples', 'type']);

function isSchema(value: unknown): value is JsonSchema {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
