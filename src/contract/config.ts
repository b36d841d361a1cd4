/**
 * The validated configuration every part of toolgraph reads (DESIGN §2–§5, §7): the catalog, policy,
 * limits, defaults, API keys and server settings. The shell imports it from here.
 *
 * The interface itself is still written in config/types.ts, next to the file schema it is parsed
 * with (config/schema.ts), while the PostgreSQL store and MCP servers add their sections to both.
 */
export type { AuthKey, Config, Role } from '../config/types.js';
