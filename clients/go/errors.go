package toolhost

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a gRPC error from toolhost, decoded: the status code and message, the google.rpc.ErrorInfo reason
// (an ErrorReason name such as "TOOL_NOT_FOUND" or "INVALID_ARGUMENTS") with its metadata, the field
// violations of invalid arguments, and RetryAfter when the server is over capacity.
type Error struct {
	Code            codes.Code
	Message         string
	Reason          string
	Metadata        map[string]string
	FieldViolations []FieldViolation
	RetryAfter      time.Duration
	status          *status.Status
}

// FieldViolation names an invalid argument by its JSON pointer ("/count") and says what is wrong with it.
type FieldViolation struct {
	Field       string
	Description string
}

func (e *Error) Error() string {
	text := fmt.Sprintf("toolhost: %s: %s", e.Code, e.Message)
	if e.Reason != "" {
		text += " (" + e.Reason + ")"
	}
	return text
}

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// AsError returns err as an *Error when it is one (errors.As), for callers that want its fields.
func AsError(err error) (*Error, bool) {
	var target *Error
	ok := errors.As(err, &target)
	return target, ok
}

func asError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	decoded := &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			decoded.Reason = strings.TrimPrefix(d.GetReason(), "ERROR_REASON_")
			decoded.Metadata = d.GetMetadata()
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				decoded.FieldViolations = append(decoded.FieldViolations, FieldViolation{v.GetField(), v.GetDescription()})
			}
		case *errdetails.RetryInfo:
			decoded.RetryAfter = d.GetRetryDelay().AsDuration()
		}
	}
	return decoded
}
