package ledger

import "reflect"

// The unexported interfaces that mirror package driver's, for
// drift_test.go (package ledger_test, which can import driver).
var (
	BackendType          = reflect.TypeFor[backend]()
	WriteQueueType       = reflect.TypeFor[writeQueue]()
	ErrorInterpreterType = reflect.TypeFor[errorInterpreter]()
	CompactorType        = reflect.TypeFor[compactor]()
	DurableWriterType    = reflect.TypeFor[durableWriter]()
	ChainAppenderType    = reflect.TypeFor[chainAppender]()
)
