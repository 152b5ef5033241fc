import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { AccountService } from "../../../gen/generation/v1/account_service_pb.js";
import { AdminService } from "../../../gen/generation/v1/admin_service_pb.js";
import { FileService } from "../../../gen/generation/v1/file_service_pb.js";
import { GenerationService } from "../../../gen/generation/v1/generation_service_pb.js";
import { TextService } from "../../../gen/generation/v1/text_service_pb.js";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection as ReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ReflectionV1alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import type { Credential, ValidationLimits } from "../../core/index.js";
import { longestPromptBytes } from "../admission.js";

/** What the edge of the core knows about one method before it reads a byte of its message. */
export interface MethodPolicy {
  readonly service: DescService;
  readonly method: DescMethod;
  /** The credential the headers must carry, checked before the message is read; undefined: none at the edge. */
  readonly credential: Credential | undefined;
  /** The largest request message accepted, in bytes as sent (before decompression). */
  readonly maxMessageBytes: number;
  /** Whether the method answers while the process cannot serve (starting, draining, a dependency down). */
  readonly servedWhileNotReady: boolean;
}

/** Services that depend on no store and answer while the process is not ready: health reports that state, reflection's contract is fixed. */
export const SERVED_WHILE_NOT_READY: ReadonlySet<string> = new Set([Health.typeName, ReflectionV1.typeName, ReflectionV1alpha.typeName]);

/** Methods whose request carries input images inline (CreateGeneration's base64, the text calls' `inline_data`); CreateVideoInteraction carries a prompt only. */
const CARRIES_INPUT_IMAGES = new Set<DescMethod>([
  GenerationService.method.createGeneration,
  TextService.method.generateContent,
  TextService.method.streamGenerateContent,
  TextService.method.countTokens,
]);

/** No credential at the edge: ListModels needs none; the session calls' handlers tell their kinds of token apart (empty messages). */
const PUBLIC = new Set<DescMethod>([GenerationService.method.listModels, AccountService.method.startSession, AccountService.method.endSession]);

/** What each service asks of a caller's headers: FileService checks the signed link in its message; reflection describes only public files. */
const CREDENTIAL_OF = new Map<DescService, Credential | undefined>([
  [AdminService, "admin"],
  [AccountService, "owner"],
  [GenerationService, "api_key"],
  [TextService, "api_key"],
  [FileService, undefined],
  [Health, undefined],
  [ReflectionV1, undefined],
  [ReflectionV1alpha, undefined],
]);

/** The largest message carrying input images: the images as base64 (strings, or bytes in Connect's JSON), the longest prompt, metadata and the rest. */
export function inputMessageLimit(limits: ValidationLimits, maxBodyBytes: number): number {
  return Math.ceil((limits.maxInputBytes * 4) / 3) + longestPromptBytes(limits) + limits.metadata.maxTotalBytes + maxBodyBytes;
}

/** The policy of every method served on the core port, by request path (`/package.Service/Method`). */
export function methodPolicies(limits: ValidationLimits, maxBodyBytes: number): Map<string, MethodPolicy> {
  const large = inputMessageLimit(limits, maxBodyBytes);
  const policies = new Map<string, MethodPolicy>();
  for (const [service, credential] of CREDENTIAL_OF) {
    for (const method of service.methods) {
      policies.set(`/${service.typeName}/${method.name}`, {
        service,
        method,
        credential: PUBLIC.has(method) ? undefined : credential,
        maxMessageBytes: CARRIES_INPUT_IMAGES.has(method) ? large : maxBodyBytes,
        servedWhileNotReady: SERVED_WHILE_NOT_READY.has(service.typeName),
      });
    }
  }
  return policies;
}

/** The creations whose answer's delivery the core is told (ANSWER_DELIVERY): a job whose answer never left is canceled. */
export const ANSWER_WATCHED: ReadonlySet<DescMethod> = new Set([GenerationService.method.createGeneration, GenerationService.method.createVideoInteraction]);
