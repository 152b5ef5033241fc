// A tiny client of the generation service, written against the Go code
// generated from proto/ (gen/, protoc-gen-go and protoc-gen-connect-go) and
// connect-go, over HTTP/2 without TLS (the core port speaks h2c).
//
// Configuration, from the environment only:
//
//	GENERATION_ADDRESS  the core port, "host:port" or "http://host:port" (for example 127.0.0.1:8081)
//	GENERATION_API_KEY  an API key of your account
//
// It creates an image job, polls it until it is done or failed, reads the
// balance, and streams a text answer. It exits with 1 on any failure, 2 when
// misconfigured.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	generationv1 "example.com/generation-client/gen/generation/v1"
	"example.com/generation-client/gen/generation/v1/generationv1connect"
)

const (
	imageModel   = "aimodel-3-pro-image"
	textModel    = "aimodel-3.5-flash"
	textPrompt   = "Write a haiku about tides"
	jobDeadline  = 120 * time.Second // how long the job may take before this client gives up
	pollInterval = 250 * time.Millisecond
)

// withKey adds the API key to every request; the service reads it from `authorization: Bearer`.
type withKey struct {
	key  string
	next http.RoundTripper
}

func (t withKey) RoundTrip(request *http.Request) (*http.Response, error) {
	request = request.Clone(request.Context())
	request.Header.Set("Authorization", "Bearer "+t.key)
	return t.next.RoundTrip(request)
}

func required(name string) string {
	value := os.Getenv(name)
	if value == "" {
		fmt.Fprintf(os.Stderr, "%s is not set (GENERATION_ADDRESS=host:port of the core, GENERATION_API_KEY=your key)\n", name)
		os.Exit(2)
	}
	return value
}

// statusName is "queued", "processing", "done" or "failed".
func statusName(status generationv1.JobStatus) string {
	return strings.ToLower(strings.TrimPrefix(status.String(), "JOB_STATUS_"))
}

// uuid4 is a random idempotency key.
func uuid4() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func run(ctx context.Context, address, apiKey string) error {
	baseURL := address
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	// HTTP/2 without TLS (h2c), as the core port speaks it (Go 1.24+).
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	httpClient := &http.Client{Transport: withKey{key: apiKey, next: h2c}}
	generation := generationv1connect.NewGenerationServiceClient(httpClient, baseURL)
	text := generationv1connect.NewTextServiceClient(httpClient, baseURL)
	fmt.Printf("service: %s (Connect over HTTP/2)\n", baseURL)

	// 1. An image job. The idempotency key makes a retry of this call safe.
	aspectRatio, resolution := "1:1", "1K"
	created, err := generation.CreateGeneration(ctx, connect.NewRequest(&generationv1.CreateGenerationRequest{
		Model:          imageModel,
		Prompt:         "a lighthouse at dusk",
		AspectRatio:    &aspectRatio,
		Resolution:     &resolution,
		IdempotencyKey: uuid4(),
	}))
	if err != nil {
		return err
	}
	jobID := created.Msg.GetJobId()
	fmt.Printf("created image job %s (%s, %s, %s): %s\n", jobID, imageModel, aspectRatio, resolution, statusName(created.Msg.GetStatus()))

	// 2. Poll until it is finished, printing each change of status.
	var job *generationv1.Job
	last := created.Msg.GetStatus()
	deadline := time.Now().Add(jobDeadline)
	for {
		got, err := generation.GetJob(ctx, connect.NewRequest(&generationv1.GetJobRequest{JobId: jobID}))
		if err != nil {
			return err
		}
		job = got.Msg.GetJob()
		status := job.GetStatus()
		if status == generationv1.JobStatus_JOB_STATUS_DONE || status == generationv1.JobStatus_JOB_STATUS_FAILED {
			break
		}
		if status != last {
			fmt.Printf("job %s: %s\n", jobID, statusName(status))
		}
		last = status
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s still %s after %s", jobID, statusName(status), jobDeadline)
		}
		time.Sleep(pollInterval)
	}
	if job.GetStatus() == generationv1.JobStatus_JOB_STATUS_FAILED {
		return fmt.Errorf("job %s: failed, %s: %s", jobID, job.GetError(), job.GetErrorMessage())
	}
	fmt.Printf("job %s: done, charged %s USD, %s at %s\n", jobID, job.GetUsage().GetCharged(), job.GetResult().GetMimeType(), job.GetResult().GetImageUrl())

	// 3. The balance, now that the job is settled.
	got, err := generation.GetBalance(ctx, connect.NewRequest(&generationv1.GetBalanceRequest{}))
	if err != nil {
		return err
	}
	balance := got.Msg.GetBalance()
	fmt.Printf("balance: %s %s (reserved %s, available %s)\n", balance.GetBalance(), balance.GetCurrency(), balance.GetReserved(), balance.GetAvailable())

	// 4. A streamed text answer, printed as it arrives; the last chunk carries the charged usage.
	fmt.Printf("streaming %s: %q\n", textModel, textPrompt)
	stream, err := text.StreamGenerateContent(ctx, connect.NewRequest(&generationv1.StreamGenerateContentRequest{
		Request: &generationv1.GenerateContentRequest{
			Model: textModel,
			Contents: []*generationv1.Content{{
				Role:  "user",
				Parts: []*generationv1.Part{{Data: &generationv1.Part_Text{Text: textPrompt}}},
			}},
		},
	}))
	if err != nil {
		return err
	}
	defer stream.Close()
	var chunks, promptTokens, outputTokens int32
	for stream.Receive() {
		chunk := stream.Msg().GetChunk()
		chunks++
		if candidates := chunk.GetCandidates(); len(candidates) > 0 {
			for _, part := range candidates[0].GetContent().GetParts() {
				if t, ok := part.GetData().(*generationv1.Part_Text); ok && !part.GetThought() {
					fmt.Print(t.Text)
				}
			}
		}
		if usage := chunk.GetUsageMetadata(); usage != nil {
			if usage.PromptTokenCount != nil {
				promptTokens = usage.GetPromptTokenCount()
			}
			if usage.CandidatesTokenCount != nil {
				outputTokens = usage.GetCandidatesTokenCount()
			}
		}
	}
	fmt.Println()
	if err := stream.Err(); err != nil {
		return err
	}
	fmt.Printf("streamed %d chunks; usage: %d prompt + %d output tokens\n", chunks, promptTokens, outputTokens)
	return nil
}

func main() {
	address := required("GENERATION_ADDRESS")
	apiKey := required("GENERATION_API_KEY")
	// A bound on the whole run: the job's deadline plus time for the other calls.
	ctx, cancel := context.WithTimeout(context.Background(), jobDeadline+time.Minute)
	defer cancel()
	if err := run(ctx, address, apiKey); err != nil {
		var connectErr *connect.Error
		if errors.As(err, &connectErr) {
			// The service attaches an ErrorDetail with a stable reason to every error.
			reason := ""
			for _, detail := range connectErr.Details() {
				if value, err := detail.Value(); err == nil {
					if errorDetail, ok := value.(*generationv1.ErrorDetail); ok {
						reason = " (reason " + errorDetail.GetReason() + ")"
					}
				}
			}
			fmt.Fprintf(os.Stderr, "failed: %s %s%s\n", connectErr.Code(), connectErr.Message(), reason)
		} else {
			fmt.Fprintf(os.Stderr, "failed: %v\n", err)
		}
		cancel()
		os.Exit(1)
	}
}
