/// The apps cardbench stands in for. Each front parses and checks the URL its app receives and
/// renders the callback URL the app would send back; it knows nothing of APDUs or sockets.
public enum Fronts {}
