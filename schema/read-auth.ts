// Type-level read checks. `readAuth` on an object type is asked once per object per request, before
// any field of that object resolves; a refusal or a thrown error answers every field of the object.
// It does what scope-auth's type-level `authScopes` function does (the same errors, in the same
// order: before the field's own scopes, whose plugin sits inside this one), without scope-auth's
// per-field cost: scope-auth runs every field of such a type through a step runner that allocates
// closures and a request-cache lookup per field per object, and on a 100-row page with four nested
// objects per row that was about a third of the request's CPU.
import SchemaBuilder, {
  BasePlugin,
  type MaybePromise,
  type PothosOutputFieldConfig,
  type SchemaTypes,
  createContextCache,
  isThenable,
} from '@pothos/core';
import type { GraphQLFieldResolver } from 'graphql';

declare global {
  export namespace PothosSchemaTypes {
    interface Plugins<Types extends SchemaTypes> {
      readAuth: PothosReadAuthPlugin<Types>;
    }
    interface SchemaBuilderOptions<Types extends SchemaTypes> {
      readAuth: {
        /** The error every field of an object answers with when its type's check returned false. */
        refused: (context: Types['Context'], typeName: string) => Error;
      };
    }
    interface ObjectTypeOptions<Types extends SchemaTypes, Shape> {
      /** May the request read this object? Only true allows; a thrown error is the answer itself. */
      readAuth?: (parent: Shape, context: Types['Context']) => MaybePromise<boolean>;
    }
  }
}

/** A check's outcome for one object: its result, or what it threw (thrown again for every field). */
type Verdict = MaybePromise<boolean> | { thrown: unknown };

const pluginName = 'readAuth';

export class PothosReadAuthPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  /** One verdict cache per type, per request. */
  private readonly verdicts = new Map<string, (context: object) => Map<unknown, Verdict>>();

  override wrapResolve(
    resolver: GraphQLFieldResolver<unknown, Types['Context'], object>,
    fieldConfig: PothosOutputFieldConfig<Types>,
  ): GraphQLFieldResolver<unknown, Types['Context'], object> {
    // Whatever the kind of the field's type: a check set anywhere is never skipped.
    const type = this.buildCache.getTypeConfig(fieldConfig.parentType);
    const check = (type.pothosOptions as PothosSchemaTypes.ObjectTypeOptions<Types, unknown>).readAuth;
    if (!check) return resolver;
    const typeName = type.name;
    const refused = this.builder.options.readAuth.refused;
    const verdicts = this.verdicts.get(typeName) ?? createContextCache(() => new Map<unknown, Verdict>());
    this.verdicts.set(typeName, verdicts);
    return (parent, args, context, info) => {
      const seen = verdicts(context);
      let verdict = seen.get(parent);
      if (verdict === undefined) {
        try {
          verdict = check(parent, context);
        } catch (thrown) {
          verdict = { thrown };
        }
        seen.set(parent, verdict);
      }
      // Only true allows: anything else a check answers (false, nothing) refuses.
      if (verdict === true) return resolver(parent, args, context, info);
      if (isThenable(verdict)) {
        return verdict.then((allowed) => {
          if (allowed !== true) throw refused(context, typeName);
          return resolver(parent, args, context, info);
        });
      }
      if (typeof verdict === 'object' && verdict !== null && 'thrown' in verdict) throw verdict.thrown;
      throw refused(context, typeName);
    };
  }
}

SchemaBuilder.registerPlugin(pluginName, PothosReadAuthPlugin);

export default pluginName;
