/**
 * The builtin demo config, used when no `--config` is given (`source: 'builtin:demo'`). It is YAML run
 * through the same validation as a file. Every tool runs on a builtin executor (sleep, echo, fail), so
 * the demo needs no external service, yet it shows resources (file:/service: keys), a dangerous tool
 * behind a review and an `after` dependency, retries and policy rules.
 */
export const DEMO_CONFIG_YAML = `# toolgraph builtin demo configuration
tools:
  - name: sleep
    description: Wait ms milliseconds, then return { ms }
    input:
      type: object
      properties: { ms: { type: integer, minimum: 0, maximum: 600000 } }
      required: [ms]
    reads: []
    writes: []
    risk: read
    idempotent: true
    retry: { attempts: 2 }
    executor: { kind: builtin, name: sleep }

  - name: echo
    description: Return the args as the output
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }

  - name: fail
    description: Fail with { message }; retried while retryable is true
    input:
      type: object
      properties: { message: { type: string }, retryable: { type: boolean } }
    reads: []
    writes: []
    risk: read
    idempotent: true
    retry: { attempts: 3, backoffMs: 100, maxBackoffMs: 1000 }
    executor: { kind: builtin, name: fail }

  - name: read_file
    description: Read a file (demo; echoes its args)
    input:
      type: object
      properties: { path: { type: string } }
      required: [path]
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }

  - name: write_file
    description: Write a file (demo; echoes its args)
    input:
      type: object
      properties: { path: { type: string }, content: { type: string } }
      required: [path, content]
    reads: []
    writes: ["file:{path}"]
    risk: write
    executor: { kind: builtin, name: echo }

  - name: run_tests
    description: Run the test suite (demo; sleeps ms milliseconds); reads every file
    input:
      type: object
      properties: { ms: { type: integer, minimum: 0, maximum: 600000 } }
      required: [ms]
    reads: ["file:*"]
    writes: []
    risk: read
    idempotent: true
    concurrency: 2
    executor: { kind: builtin, name: sleep }

  - name: deploy
    description: Deploy an image to a service (demo; echoes its args)
    input:
      type: object
      properties: { name: { type: string }, image: { type: string } }
      required: [name]
    reads: []
    writes: ["service:{name}"]
    scope: global
    risk: dangerous
    rate: 10/min
    after: [run_tests]
    executor: { kind: builtin, name: echo }

policy:
  rules:
    - match: { tool: deploy, tenant: trial }
      deny: trial tenants cannot deploy
    - match: { risk: dangerous }
      review: true

limits:
  global: 16
  perRun: 8
  tenant: { default: 8 }
  tool: { deploy: 1 }
  maxCallsPerRun: 1000

defaults:
  timeoutMs: 60000
  failure: partial
`;
