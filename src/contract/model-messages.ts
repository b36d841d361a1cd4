/**
 * The model's own assistant messages, as `POST /v1/runs` takes them (DESIGN §11): OpenAI's with
 * `tool_calls` (arguments are JSON strings), Anthropic's with `tool_use` content blocks.
 */
import { z } from 'zod';

const OpenAiToolCall = z.object({
  id: z.string().min(1),
  type: z.literal('function').optional(),
  function: z.object({ name: z.string().min(1), arguments: z.string().optional() }),
});
export const OpenAiMessageSchema = z.object({
  role: z.literal('assistant').optional(),
  content: z.unknown().optional(),
  tool_calls: z.array(OpenAiToolCall),
});

const AnthropicBlock = z.union([
  z.object({
    type: z.literal('tool_use'),
    id: z.string().min(1),
    name: z.string().min(1),
    input: z.record(z.string(), z.unknown()).optional(),
  }),
  z.object({ type: z.string().refine((t) => t !== 'tool_use', 'a tool_use block needs id, name and input') }).passthrough(),
]);
export const AnthropicMessageSchema = z.object({
  role: z.literal('assistant').optional(),
  content: z.array(AnthropicBlock),
});

export type OpenAiMessage = z.infer<typeof OpenAiMessageSchema>;
export type AnthropicMessage = z.infer<typeof AnthropicMessageSchema>;
