import { defineConfig } from 'vitest/config'
export default defineConfig({ test: { include: ['packages/*/test/**/*.test.ts', 'examples/*/test/**/*.test.ts'], globalSetup: ['packages/devdb/src/vitest-global-setup.ts'], testTimeout: 30_000, hookTimeout: 60_000 } })
