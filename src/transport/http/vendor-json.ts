import type {
  Candidate, Content, GenerateContentResponse, ModalityTokenCount, Part, UsageMetadata,
} from "../../../gen/generation/v1/text_service_pb.js";

/** toJson's text (then JSON.stringify's) at half their CPU per streamed event (decision 0023); vendor-json.test.ts compares the two. */
export function generateContentResponseJson(response: GenerateContentResponse): string {
  const json: Json = {};
  if (response.candidates.length > 0) json.candidates = response.candidates.map(candidateJson);
  if (response.usageMetadata) json.usageMetadata = usageJson(response.usageMetadata);
  if (response.modelVersion !== "") json.modelVersion = response.modelVersion;
  if (response.responseId !== "") json.responseId = response.responseId;
  if (response.promptFeedback) {
    json.promptFeedback = response.promptFeedback.blockReason !== "" ? { blockReason: response.promptFeedback.blockReason } : {};
  }
  return JSON.stringify(json);
}

/** A JSON object being built: members are added in the fields' order, zero values left out. */
type Json = Record<string, unknown>;

function candidateJson(candidate: Candidate): Json {
  const json: Json = {};
  if (candidate.content) json.content = contentJson(candidate.content);
  if (candidate.finishReason !== "") json.finishReason = candidate.finishReason;
  if (candidate.index !== 0) json.index = candidate.index;
  return json;
}

function contentJson(content: Content): Json {
  const json: Json = {};
  if (content.role !== "") json.role = content.role;
  if (content.parts.length > 0) json.parts = content.parts.map(partJson);
  return json;
}

function partJson(part: Part): Json {
  const json: Json = {};
  const data = part.data;
  if (data.case === "text") json.text = data.value;
  else if (data.case === "inlineData") {
    const blob: Json = {};
    if (data.value.mimeType !== "") blob.mimeType = data.value.mimeType;
    const bytes = data.value.data;
    if (bytes.length > 0) blob.data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
    json.inlineData = blob;
  }
  // In field-number order, as toJson writes them: thought (3) comes before the function parts (4, 5).
  if (part.thought) json.thought = true;
  if (data.case === "functionCall") json.functionCall = functionJson(data.value.id, data.value.name, "args", data.value.args);
  else if (data.case === "functionResponse") {
    json.functionResponse = functionJson(data.value.id, data.value.name, "response", data.value.response);
  }
  const signature = part.thoughtSignature;
  if (signature.length > 0) json.thoughtSignature = Buffer.from(signature.buffer, signature.byteOffset, signature.byteLength).toString("base64");
  // file_data (7) last; answers never carry one, but the writer stays toJson's.
  if (data.case === "fileData") {
    const file: Json = {};
    if (data.value.mimeType !== "") file.mimeType = data.value.mimeType;
    if (data.value.fileUri !== "") file.fileUri = data.value.fileUri;
    json.fileData = file;
  }
  return json;
}

/** A FunctionCall or FunctionResponse: its Struct is already a JSON object. */
function functionJson(id: string, name: string, member: "args" | "response", value: Json | undefined): Json {
  const json: Json = {};
  if (id !== "") json.id = id;
  if (name !== "") json.name = name;
  if (value !== undefined) json[member] = value;
  return json;
}

/** Its counts have explicit presence: written when set, 0 included. */
function usageJson(usage: UsageMetadata): Json {
  const json: Json = {};
  if (usage.promptTokenCount !== undefined) json.promptTokenCount = usage.promptTokenCount;
  if (usage.candidatesTokenCount !== undefined) json.candidatesTokenCount = usage.candidatesTokenCount;
  if (usage.totalTokenCount !== undefined) json.totalTokenCount = usage.totalTokenCount;
  if (usage.promptTokensDetails.length > 0) json.promptTokensDetails = usage.promptTokensDetails.map(countJson);
  if (usage.candidatesTokensDetails.length > 0) json.candidatesTokensDetails = usage.candidatesTokensDetails.map(countJson);
  if (usage.thoughtsTokenCount !== undefined) json.thoughtsTokenCount = usage.thoughtsTokenCount;
  return json;
}

function countJson(count: ModalityTokenCount): Json {
  const json: Json = {};
  if (count.modality !== "") json.modality = count.modality;
  if (count.tokenCount !== 0) json.tokenCount = count.tokenCount;
  return json;
}
