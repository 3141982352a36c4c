import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
// The library from its sources, as tsconfig.base.json's `paths` says (its exports point at dist/).
const flushwave = fileURLToPath(new URL('./packages/flushwave/src/index.ts', import.meta.url))
export default defineConfig({ resolve: { alias: { flushwave } }, test: { include: ['packages/*/test/**/*.test.ts', 'examples/*/test/**/*.test.ts'], globalSetup: ['packages/devdb/src/vitest-global-setup.ts'], testTimeout: 30_000, hookTimeout: 60_000 } })
