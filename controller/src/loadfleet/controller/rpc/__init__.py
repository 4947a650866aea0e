"""The controller's gRPC edge: servicers, the server, and the one conversion module
between protobuf messages and the controller's dataclasses."""
