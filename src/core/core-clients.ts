import type { Client } from "@connectrpc/connect";
import type { AccountService } from "../../gen/generation/v1/account_service_pb.js";
import type { AdminService } from "../../gen/generation/v1/admin_service_pb.js";
import type { FileService } from "../../gen/generation/v1/file_service_pb.js";
import type { GenerationService } from "../../gen/generation/v1/generation_service_pb.js";
import type { TextService } from "../../gen/generation/v1/text_service_pb.js";

/** The core as the gateway sees it: clients of the generated service interfaces. */
export interface CoreClients {
  readonly generation: Client<typeof GenerationService>;
  readonly text: Client<typeof TextService>;
  readonly admin: Client<typeof AdminService>;
  readonly account: Client<typeof AccountService>;
  readonly files: Client<typeof FileService>;
}
