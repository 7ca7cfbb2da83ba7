/// Amounts in minor units shown as major units with two decimals, whatever the locale: the one
/// formatter of keypad prompts, callbacks and the command line.
public enum Money {
    /// 12345 -> "123.45", -5 -> "-0.05".
    public static func decimal<N: BinaryInteger>(_ minor: N) -> String {
        let magnitude = minor.magnitude
        let fraction = magnitude % 100
        return (minor < 0 ? "-" : "") + String(magnitude / 100) + "." + (fraction < 10 ? "0" : "") + String(fraction)
    }
}
