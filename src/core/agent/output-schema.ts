import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/**
 * A message's `output_schema`, compiled once with ajv, in the dialect its `$schema` names
 * (draft 2020-12, 2019-09, else draft-07), with formats: the run's final answer must validate.
 */
const options = { strict: false, allErrors: true, validateSchema: true } as const;
/** Each dialect's instance is made (its meta-schemas compiled) at its first schema, not at start-up. */
const dialects: { draft7?: Ajv; draft2019?: Ajv; draft2020?: Ajv } = {};
const withFormats = (instance: Ajv): Ajv => {
  addFormats.default(instance);
  return instance;
};

function ajvFor(schema: Record<string, unknown>): Ajv {
  const dialect = typeof schema.$schema === 'string' ? schema.$schema : '';
  if (dialect.includes('2020-12')) return (dialects.draft2020 ??= withFormats(new Ajv2020(options) as unknown as Ajv));
  if (dialect.includes('2019-09')) return (dialects.draft2019 ??= withFormats(new Ajv2019(options) as unknown as Ajv));
  return (dialects.draft7 ??= withFormats(new Ajv(options)));
}
const compiled = new WeakMap<object, ValidateFunction>();

/** The largest output_schema a message may carry, as JSON. */
export const MAX_OUTPUT_SCHEMA_BYTES = 64 * 1024;

/** Why a schema cannot be used, or null when it compiles. */
export function outputSchemaProblem(schema: Record<string, unknown>): string | null {
  if (Buffer.byteLength(JSON.stringify(schema)) > MAX_OUTPUT_SCHEMA_BYTES) return `output_schema is larger than ${MAX_OUTPUT_SCHEMA_BYTES / 1024} KiB`;
  try {
    validatorOf(schema);
    return null;
  } catch (error) {
    return `output_schema is not a usable JSON Schema: ${(error as Error).message}`;
  }
}

export type OutputCheck = { ok: true; value: unknown } | { ok: false; errors: string };

/** Checks a value against the schema; the errors as lines the model can act on. */
export function checkOutput(schema: Record<string, unknown>, value: unknown): OutputCheck {
  const validate = validatorOf(schema);
  if (validate(value)) return { ok: true, value };
  return { ok: false, errors: describeErrors(validate.errors ?? []) };
}

/** A text answer as JSON (a fenced block is accepted), then checked. */
export function checkTextOutput(schema: Record<string, unknown>, text: string): OutputCheck {
  const trimmed = text.trim().replace(/^```(?:json)?\s*\n([\s\S]*?)\n```$/i, '$1');
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch (error) {
    return { ok: false, errors: `the answer is not JSON (${(error as Error).message})` };
  }
  return checkOutput(schema, value);
}

/**
 * The `final_output` tool's parameters: the schema itself when it describes an object (tool
 * parameters must), else `{value: <schema>}` (`wrapped`: the call's `value` is the output).
 */
export function finalOutputParameters(schema: Record<string, unknown>): { parameters: Record<string, unknown>; wrapped: boolean } {
  const { $schema: _ignored, ...rest } = schema;
  if (rest.type === 'object') return { parameters: rest, wrapped: false };
  return { parameters: { type: 'object', properties: { value: rest }, required: ['value'], additionalProperties: false }, wrapped: true };
}

function validatorOf(schema: Record<string, unknown>): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    // $id would register the schema globally in ajv: a second message with the same $id would fail to compile.
    const { $id: _id, ...anonymous } = schema;
    const ajv = ajvFor(schema);
    validate = ajv.compile(anonymous);
    // ajv keeps every schema it compiled: the function lives on here, the cache entry goes.
    ajv.removeSchema(anonymous);
    compiled.set(schema, validate);
  }
  return validate;
}

function describeErrors(errors: ErrorObject[]): string {
  return errors
    .slice(0, 20)
    .map((error) => `- ${error.instancePath || '(the whole value)'} ${error.message ?? 'is invalid'}${error.params && Object.keys(error.params).length > 0 ? ` ${JSON.stringify(error.params)}` : ''}`)
    .join('\n');
}
