/**
 * Model formats (DESIGN §11): the assistant message as the model sent it, in, and the messages to
 * append to the conversation, out.
 *
 * In: `{ openai: <assistant message with tool_calls> }` (arguments are JSON strings; a malformed one
 * fails that call with `invalid_args`, not the request) or `{ anthropic: <assistant message whose
 * content has tool_use blocks> }` (text blocks are ignored). Call ids are the model's.
 *
 * Out, in call order: OpenAI `[{ role: "tool", tool_call_id, content }]`; Anthropic
 * `[{ role: "user", content: [{ type: "tool_result", tool_use_id, content, is_error? }] }]`. A
 * failed, blocked or cancelled call is an error result that says why; a call whose outcome is unknown
 * (`outcome_unknown`, DESIGN §4) says that it may have taken effect.
 *
 * Names (contract/model-names.ts): a model calls a tool by the name it was exported under
 * (`spotify_play` for `spotify.play`); with `names`, such a call runs the real tool, and an error result
 * names the tool as the model knows it.
 */
import type { CallInput } from '../core/calls.js';
import type { AnthropicMessage, OpenAiMessage } from '../contract/model-messages.js';
import type { CallView, RunView } from '../core/view.js';
import { toolOfModelName, type ModelNames } from '../contract/model-names.js';

export function callsFromOpenAi(message: OpenAiMessage, names?: Pick<ModelNames, 'tool'>): CallInput[] {
  return message.tool_calls.map((tc) => {
    const tool = toolOfModelName(names, tc.function.name);
    const text = tc.function.arguments ?? '{}';
    try {
      const args: unknown = text.trim() === '' ? {} : JSON.parse(text);
      if (args === null || typeof args !== 'object' || Array.isArray(args)) {
        return { id: tc.id, tool, args: {}, invalid: `arguments must be a JSON object, got ${text.slice(0, 200)}` };
      }
      return { id: tc.id, tool, args: args as Record<string, unknown> };
    } catch (e) {
      return {
        id: tc.id,
        tool,
        args: {},
        invalid: `arguments are not valid JSON (${(e as Error).message}): ${text.slice(0, 200)}`,
      };
    }
  });
}

export function callsFromAnthropic(message: AnthropicMessage, names?: Pick<ModelNames, 'tool'>): CallInput[] {
  const calls: CallInput[] = [];
  for (const block of message.content) {
    if (block.type === 'tool_use') {
      const b = block as { id: string; name: string; input?: Record<string, unknown> };
      calls.push({ id: b.id, tool: toolOfModelName(names, b.name), args: b.input ?? {} });
    }
  }
  return calls;
}

/** What the model reads for one call: its output as JSON, or an error that says why. */
function resultText(c: CallView, names?: Pick<ModelNames, 'exported'>): { text: string; isError: boolean } {
  if (c.status === 'succeeded') return { text: typeof c.output === 'string' ? c.output : JSON.stringify(c.output ?? null), isError: false };
  const why = c.error ?? c.blockedBy;
  if (why?.code === 'outcome_unknown') {
    // DESIGN §4: the model must be told that the call may have taken effect, so it does not just ask again.
    return {
      text: `Error: the outcome of ${c.tool} is unknown: it was sent and no answer came, so it may or may not have taken effect; check before calling it again (outcome_unknown: ${why.message})`,
      isError: true,
    };
  }
  const reason = why ? `${why.code}: ${why.message}` : `the call is ${c.status}`;
  const verb =
    c.status === 'failed'
      ? 'failed'
      : c.status === 'blocked'
        ? 'was blocked'
        : c.status === 'cancelled'
          ? 'was cancelled'
          : `is ${c.status}`;
  return { text: `Error: ${names?.exported(c.tool) ?? c.tool} ${verb}: ${reason}`, isError: true };
}

export function openAiMessages(run: RunView, names?: Pick<ModelNames, 'exported'>) {
  return run.calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: resultText(c, names).text }));
}

export function anthropicMessages(run: RunView, names?: Pick<ModelNames, 'exported'>) {
  const content = run.calls.map((c) => {
    const r = resultText(c, names);
    return { type: 'tool_result' as const, tool_use_id: c.id, content: r.text, ...(r.isError ? { is_error: true } : {}) };
  });
  return [{ role: 'user' as const, content }];
}
