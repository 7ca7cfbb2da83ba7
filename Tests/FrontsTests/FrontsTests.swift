import Testing
@testable import Fronts
