/**
 * Joist, the closest peer (a pipelined flush), cannot be installed from the npm registry here:
 * `npm install joist-orm@2.3.0` fails with
 *   npm error code ETARGET
 *   npm error notarget No matching version found for joist-codegen@2.3.0.
 * (its other packages, joist-core and joist-knex, answer 404). Its numbers from its own
 * publication are quoted in the README instead.
 */
throw new Error('joist-orm 2.3.0 cannot be installed from the npm registry: npm error notarget No matching version found for joist-codegen@2.3.0.')
