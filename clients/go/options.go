package toolhost

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	toolhostv1 "github.com/toolhost/toolhost/clients/go/gen/toolhost/v1"
)

// Option configures Dial.
type Option func(*options)

type options struct {
	tlsConfig       *tls.Config
	token           string
	insecureToken   bool
	maxReceiveBytes int
	extra           []grpc.DialOption
}

// WithTLS connects over TLS with config (nil: the system's roots and the target's host name).
func WithTLS(config *tls.Config) Option {
	return func(o *options) {
		if config == nil {
			config = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.tlsConfig = config
	}
}

// WithToken sends token as a bearer token ("authorization: Bearer …") with every call. It is only sent over TLS,
// unless WithInsecureToken allows plaintext to a target on this machine.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithInsecureToken lets WithToken send the token without TLS, to a loopback address or a unix socket only
// (a sidecar on the same host); Dial refuses any other target.
func WithInsecureToken() Option { return func(o *options) { o.insecureToken = true } }

// WithMaxReceiveBytes changes the largest response accepted (DefaultMaxReceiveBytes otherwise).
func WithMaxReceiveBytes(n int) Option { return func(o *options) { o.maxReceiveBytes = n } }

// WithDialOptions adds gRPC dial options (interceptors, a load-balancing service config, keepalive ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.extra = append(o.extra, opts...) }
}

func (o *options) dialOptions(target string) ([]grpc.DialOption, error) {
	dial := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.maxReceiveBytes))}
	if o.tlsConfig != nil {
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(o.tlsConfig)))
	} else {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.token != "" {
		plaintext := o.tlsConfig == nil
		if plaintext && !o.insecureToken {
			return nil, errors.New("toolhost: a bearer token is only sent over TLS; use WithTLS, or " +
				"WithInsecureToken for a loopback address or unix socket")
		}
		if plaintext && !IsLocalTarget(target) {
			return nil, errors.New("toolhost: WithInsecureToken only allows a loopback address or unix socket; " +
				target + " is neither, so the token would cross the network in plaintext: use WithTLS")
		}
		dial = append(dial, grpc.WithPerRPCCredentials(bearerToken{token: o.token, requireTLS: !plaintext}))
	}
	return append(dial, o.extra...), nil
}

// IsLocalTarget reports whether target is a unix socket or a loopback address (127.0.0.0/8, ::1, localhost).
func IsLocalTarget(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	for _, scheme := range []string{"dns:///", "passthrough:///", "ipv4:", "ipv6:"} {
		target = strings.TrimPrefix(target, scheme)
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

type bearerToken struct {
	token      string
	requireTLS bool
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearerToken) RequireTransportSecurity() bool { return b.requireTLS }

// CallOption configures one CallTool or StreamCallTool call.
type CallOption func(*callOptions)

type callOptions struct {
	callID            string
	outputFormat      toolhostv1.OutputFormat
	filterEmptyFields bool
}

// WithCallID gives the call an identifier of the caller's choosing, such as its own request or job id. The
// server echoes it in CallToolResponse.CallId and writes it in its logs, audit trail and traces, so the call
// can be found there by the id the caller already has; without it the server generates one.
func WithCallID(id string) CallOption { return func(o *callOptions) { o.callID = id } }

// WithOutputFormat chooses how the result's Output is written: toolhostv1.OutputFormat_OUTPUT_FORMAT_JSON (compact
// JSON of the structured output, keys sorted), OUTPUT_FORMAT_PRETTY (indented JSON, keys sorted) or
// OUTPUT_FORMAT_TEXT (the tool's own text). A tool without structured output keeps its text in every format;
// without this option the tool chooses. StructuredOutput stays the data itself. In StreamCallTool the format
// applies to the result; the output chunks are the tool's text as it writes it.
func WithOutputFormat(format toolhostv1.OutputFormat) CallOption {
	return func(o *callOptions) { o.outputFormat = format }
}

// WithFilterEmptyFields drops null and empty ("", [], {}) object fields, at every depth, from the result's
// structured output and from an Output rendered from it. List elements are kept.
func WithFilterEmptyFields() CallOption { return func(o *callOptions) { o.filterEmptyFields = true } }

func callSettings(opts []CallOption) callOptions {
	var settings callOptions
	for _, opt := range opts {
		opt(&settings)
	}
	return settings
}
