import Testing
@testable import Daemon
