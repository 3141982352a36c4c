/**
 * Joist, the closest peer (a pipelined flush), cannot be installed from the npm registry here:
 * `npm install joist-orm@2.3.0` fails with
 *   npm error code ETARGET
 *   npm error notarget No matching version found for joist-codegen@2.3.0.
 * (its other packages, joist-core and joist-knex, answer 404). The runner lists this error under
 * "Not measured" in docs/benchmarks.md.
 */
throw new Error('joist-orm 2.3.0 cannot be installed from the npm registry: npm error notarget No matching version found for joist-codegen@2.3.0.')
