import { z } from 'zod';
import { loadDescription } from '../tools/load-description.js';
import { defineTool, type ToolDefinition } from '../tools/tool.js';
import { LlmError, type LlmClient, type LlmSettings, type LlmToolSchema } from './llm.js';
import { checkOutput, checkTextOutput, finalOutputParameters, type OutputCheck } from './output-schema.js';

export const FINAL_OUTPUT_TOOL = 'final_output';
/** Invalid final answers a run tolerates (each answered with what was wrong) before it fails. */
export const MAX_OUTPUT_RETRIES = 2;

const DESCRIPTION = loadDescription(import.meta.url, 'final-output.md');

/**
 * What a run owes when the message it answers carried an `output_schema`: a final answer that
 * validates. Asked for with the provider's JSON-schema response format when the endpoint takes it
 * (`json_schema`), else with a `final_output` tool whose parameters are the schema (`tool`).
 * Invalid answers are sent back with the validation errors, a bounded number of times.
 */
export class OutputRequirement {
  readonly mode: 'json_schema' | 'tool';
  readonly tool: ToolDefinition | null;
  readonly toolSchema: LlmToolSchema | null;
  private readonly wrapped: boolean;
  private failures = 0;

  constructor(readonly schema: Record<string, unknown>, options: { llm: LlmClient; settings: LlmSettings }) {
    this.mode = options.llm.supportsJsonSchema?.(options.settings) ? 'json_schema' : 'tool';
    const { parameters, wrapped } = finalOutputParameters(schema);
    this.wrapped = wrapped;
    if (this.mode === 'tool') {
      this.toolSchema = { name: FINAL_OUTPUT_TOOL, description: DESCRIPTION, parameters };
      this.tool = defineTool({
        name: FINAL_OUTPUT_TOOL,
        description: DESCRIPTION,
        parameters: z.record(z.string(), z.unknown()),
        jsonSchema: parameters,
        execute: async (input) => {
          const check = this.checkCall(input);
          if (check.ok) return { isError: false, content: 'Output accepted: the run ends with it.', data: { output_valid: true } };
          return { isError: true, content: `Not accepted: the value does not match the output schema:\n${check.errors}\nCall final_output again with a corrected value.`, data: { error: 'output_invalid' } };
        },
      });
    } else {
      this.tool = null;
      this.toolSchema = null;
    }
  }

  /** The request's `responseFormat` (json_schema mode). */
  get responseFormat(): { name: string; schema: Record<string, unknown> } | undefined {
    if (this.mode !== 'json_schema') return undefined;
    const { $schema: _ignored, $id: _id, ...schema } = this.schema;
    return { name: 'final_output', schema };
  }

  /** The arguments of a final_output call as the output value. */
  checkCall(args: Record<string, unknown>): OutputCheck {
    return checkOutput(this.schema, this.wrapped ? args.value : args);
  }

  /** A text answer: the output in json_schema mode; in tool mode, never (final_output was owed). */
  checkAnswer(text: string): OutputCheck {
    if (this.mode === 'tool') return { ok: false, errors: `the answer must be given by calling ${FINAL_OUTPUT_TOOL}, not as text` };
    return checkTextOutput(this.schema, text);
  }

  /** One more invalid answer: the note the model reads, or the end of the run past the bound. */
  fail(errors: string): string {
    this.failures += 1;
    if (this.failures > MAX_OUTPUT_RETRIES) {
      throw new LlmError('llm_output_invalid', `The final answer did not match the output_schema after ${this.failures} attempts: ${errors.split('\n')[0]}`);
    }
    return this.mode === 'tool'
      ? `Your answer is not accepted: ${errors}. End the run by calling ${FINAL_OUTPUT_TOOL} with the answer.`
      : `Your answer does not match the required output schema:\n${errors}\nAnswer again with only the JSON value, matching the schema.`;
  }

  /** Not run: finish cannot end a run that owes structured output. */
  get finishRefusal(): string {
    return this.mode === 'tool'
      ? `Not run: this run must end with a call to ${FINAL_OUTPUT_TOOL} (the user asked for an answer matching a schema), not with finish.`
      : 'Not run: this run must end with an answer that is only the JSON value matching the required schema, not with finish.';
  }
}
