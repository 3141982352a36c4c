import type { WriteStatement } from '../sql/statement.js'

/**
 * Holds the last small flush's change rows, SQL, result (its plan and phases in it) and clock until
 * the next small flush replaces them, so that V8 keeps their hidden classes.
 *
 * Why: V8 frees a hidden class in a major GC once no object has it. A flush's objects are all
 * garbage soon after it (a request's EntityManager with them), so the first flush after a major GC
 * makes its classes again, property by property: the result object, the change set, the plan and
 * the statements. A production process pays this once per major GC; the bench, with a full GC
 * before every sample, pays it on every flush. Keeping the driver's queries and answers as well
 * gained nothing more, so they are left to die (docs/design-notes.md, "Kept hidden classes").
 *
 * Bounded: only a flush that sent no COPY and whose parameters total at most KEEP_PARAM_CHARS
 * characters is kept (a few hundred rows), so a large flush's rows are never held past it. Nothing
 * here refers to an entity: the change rows, statements and result hold schema metadata and strings only.
 */
export const KEEP_PARAM_CHARS = 32_768

let kept: readonly object[] = []

/** Keeps `objects` of a committed flush whose SQL (`waves`) is small (see above). */
export function keepShapes(waves: readonly (readonly WriteStatement[])[], objects: readonly object[]): void {
  if (paramChars(waves, KEEP_PARAM_CHARS) <= KEEP_PARAM_CHARS) kept = objects
}

/** The characters of the statements' parameters, counted until they pass `limit`. */
function paramChars(waves: readonly (readonly WriteStatement[])[], limit: number): number {
  let chars = 0
  for (let w = 0; w < waves.length; w++) {
    const statements = waves[w]!
    for (let s = 0; s < statements.length; s++) {
      // A COPY's rows are no parameters, but they are the flush's largest data (a large insert).
      if (statements[s]!.copy !== undefined) return Infinity
      const params = statements[s]!.params
      for (let p = 0; p < params.length; p++) {
        chars += params[p]?.length ?? 0
        if (chars > limit) return chars
      }
    }
  }
  return chars
}

/** What is kept now (for tests). */
export function keptShapes(): readonly object[] {
  return kept
}
