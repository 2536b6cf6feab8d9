package toolhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// ErrNoStructuredOutput is returned by DecodeStructuredOutput for a result that has no structured output: a
// tool that returns only text, or one that failed.
var ErrNoStructuredOutput = errors.New("toolhost: the tool returned no structured output")

// StructuredOutput returns the tool's structured result as JSON text (see CallToolResponse.structured_output),
// and false when the tool returned none. A JSON null the tool returned is the text "null" with true.
func StructuredOutput(response *toolhostv1.CallToolResponse) (json.RawMessage, bool) {
	return valueJSON(response.GetStructuredOutput())
}

// DecodeStructuredOutput decodes the tool's structured result into v, as json.Unmarshal does except that a
// number decoded into an interface value is a json.Number, which keeps its digits (json.Unmarshal would make
// every number a float64). It returns ErrNoStructuredOutput when the tool returned none, so a missing result
// is never mistaken for one whose fields are all zero.
func DecodeStructuredOutput(response *toolhostv1.CallToolResponse, v any) error {
	text, ok := StructuredOutput(response)
	if !ok {
		return ErrNoStructuredOutput
	}
	decoder := json.NewDecoder(bytes.NewReader(text))
	decoder.UseNumber()
	if err := decoder.Decode(v); err != nil {
		return fmt.Errorf("toolhost: decode the structured output of %s: %w", response.GetTool(), err)
	}
	return nil
}

// ParameterDefault returns the value a call gets when it leaves the parameter out, as JSON text, and false
// when the parameter has no default (a default of null is the text "null" with true).
func ParameterDefault(parameter *toolhostv1.ToolParameter) (json.RawMessage, bool) {
	return valueJSON(parameter.GetDefault())
}

// ParameterEnum returns the only values the parameter allows, each as JSON text, in the declared order; nil
// when the parameter is not an enumeration.
func ParameterEnum(parameter *toolhostv1.ToolParameter) []json.RawMessage {
	values := parameter.GetEnum()
	if len(values) == 0 {
		return nil
	}
	texts := make([]json.RawMessage, len(values))
	for i, value := range values {
		texts[i], _ = valueJSON(value)
	}
	return texts
}

// valueJSON is the JSON text of value, and false when value is unset (a nil message: proto3 tells an absent
// Value from a null one).
func valueJSON(value *structpb.Value) (json.RawMessage, bool) {
	if value == nil {
		return nil, false
	}
	// AsInterface yields only maps, slices, strings, float64s (NaN and infinities already turned into
	// strings), bools and nil, and encoding/json writes a float64 holding a whole number below 1e21 with its
	// integer digits.
	text, err := json.Marshal(value.AsInterface())
	if err != nil {
		panic(fmt.Sprintf("toolhost: a protobuf Value did not encode as JSON: %v", err)) // cannot happen, see above
	}
	return text, true
}
